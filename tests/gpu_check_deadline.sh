#!/usr/bin/env bash
# scripts/gpu-check.sh against its deadline, on any machine: a phase made to hang
# (GPUCACHE_GPU_FAKE_HANG) is stopped at its limit after a snapshot of its processes, the phases
# after it that no longer fit are skipped (deadline), and summary.txt, summary.json and
# logs.tar.gz are in the output folder; a check stopped by SIGTERM still writes the results so
# far. Every other phase is skipped (GPUCACHE_GPU_SKIP), so this takes seconds.
#   bash tests/gpu_check_deadline.sh [scripts/gpu-check.sh]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
check=${1:-$here/../scripts/gpu-check.sh}
python=${PYTHON:-python3}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() {
  echo "FAIL: $*" >&2
  for file in "$scratch"/out*/summary.txt "$scratch"/log*.txt; do
    [ -f "$file" ] && { echo "--- $file" >&2; cat "$file" >&2; }
  done
  exit 1
}
# The output folder must hold what the device tool brings back: at most 8 plain files, names of
# letters, digits, '.', '_', '-', 16 MiB each.
check_outdir() {
  local dir=$1 count=0 file
  for file in "$dir"/* "$dir"/.[!.]*; do
    [ -e "$file" ] || continue
    count=$((count + 1))
    [ -f "$file" ] || fail "$file is not a plain file"
    [[ "$(basename "$file")" =~ ^[A-Za-z0-9._-]+$ ]] || fail "$file: a name the tool would not bring back"
    [ "$(stat -c %s "$file")" -le $((16 * 1024 * 1024)) ] || fail "$file is over 16 MiB"
  done
  [ "$count" -le 8 ] || fail "$count files in $dir (the tool brings back 8)"
  for file in summary.txt summary.json logs.tar.gz; do
    [ -s "$dir/$file" ] || fail "no $file in $dir"
  done
}
skip_rest=configure,build,ctest_gpu,pip,linkage,pytest,ctest,bench
# Its own unpack and build folders: this test also runs inside a real check (its ctest phase), whose
# prefix a deps phase here must never replace.
export GPUCACHE_GPU_PREFIX=$scratch/prefix GPUCACHE_GPU_BUILD=$scratch/build
unset GPUCACHE_GPU_FAKE_HANG GPUCACHE_GPU_TEST_TIMEOUT_S

# 1. The deadline cuts the hanging phase: 15 s in all, 5 of them kept for the snapshot and results
# (the phase gets about 9 s: a loaded machine may be seconds late starting it).
begin=$(date +%s)
code=0
TMPDIR=$scratch GPUCACHE_GPU_DEADLINE_S=15 GPUCACHE_GPU_RESERVE_S=5 GPUCACHE_GPU_FAKE_HANG=machine \
  GPUCACHE_GPU_SKIP=$skip_rest GPUCACHE_GPU_PYTHON=$python \
  bash "$check" "$scratch/out" >"$scratch/log1.txt" 2>&1 || code=$?
seconds=$(($(date +%s) - begin))
[ "$code" = 1 ] || fail "exit $code after a phase timed out (expected 1)"
# Generous: the deadline is 15 s; a loaded machine may be slow to write the results.
[ "$seconds" -lt 40 ] || fail "took $seconds s against a deadline of 15 s"
check_outdir "$scratch/out"
mkdir "$scratch/logs1"
tar -xzf "$scratch/out/logs.tar.gz" -C "$scratch/logs1"
hang_log=$scratch/logs1/logs/machine.hang.log
[ -f "$hang_log" ] || fail "no logs/machine.hang.log in logs.tar.gz"
grep -qE '^\* +[0-9]+ +[0-9]+ S .* sleep 100000' "$hang_log" || fail "the snapshot lists no hanging sleep: $(cat "$hang_log")"
grep -qE '^thread [0-9]+ \(sleep\): state S, wchan ' "$hang_log" || fail "the snapshot has no thread line of the sleep"
grep -q 'stopped after .* s (its limit)' "$scratch/logs1/logs/machine.log" || fail "machine.log does not say it was stopped"
"$python" - "$scratch/out/summary.json" "$scratch/out/summary.txt" <<'PY' || fail "summary contents"
import json, sys
summary = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
phases = {p["phase"]: p for p in summary["phases"]}
assert summary["finished"] and not summary["ok"] and not summary["complete"], summary
assert phases["machine"]["status"] == "timeout", phases["machine"]
assert "stopped at its limit" in phases["machine"]["note"], phases["machine"]
assert phases["deps"]["status"] == "skipped" and phases["deps"]["note"].startswith("(deadline)"), phases["deps"]
assert phases["bench"]["note"] == "needs pip (skipped)" or "GPUCACHE_GPU_SKIP" in phases["bench"]["note"], phases["bench"]
assert "sleep" in " ".join(summary["hangs"]["machine"]), summary["hangs"]
assert "hang in machine (logs/machine.hang.log):" in text, text
assert "machine    timeout" in text, text
PY

# 2. SIGTERM while a phase hangs (the caller's time is up): the results so far are written, the
# phase recorded as interrupted, its processes stopped.
TMPDIR=$scratch GPUCACHE_GPU_DEADLINE_S=300 GPUCACHE_GPU_FAKE_HANG=machine \
  GPUCACHE_GPU_SKIP=$skip_rest GPUCACHE_GPU_PYTHON=$python \
  bash "$check" "$scratch/out2" >"$scratch/log2.txt" 2>&1 &
pid=$!
for _ in $(seq 100); do
  grep -q 'machine \.\.\.' "$scratch/log2.txt" 2>/dev/null && break
  sleep 0.1
done
sleep 0.5
# Everything the check runs, to see that none of it outlives the check.
started=$(pgrep -P "$pid" || true)
for _ in 1 2 3; do
  for child in $started; do started+=" $(pgrep -P "$child" | tr "\n" " " || true)"; done
done
[ -n "$started" ] || fail "the check runs no process while its phase hangs"
kill -TERM "$pid"
code=0
wait "$pid" || code=$?
[ "$code" = 143 ] || fail "exit $code after SIGTERM (expected 143)"
check_outdir "$scratch/out2"
"$python" - "$scratch/out2/summary.json" <<'PY' || fail "summary after SIGTERM"
import json, sys
summary = json.load(open(sys.argv[1]))
phases = {p["phase"]: p for p in summary["phases"]}
assert not summary["finished"] and not summary["ok"], summary
assert phases["machine"]["status"] == "interrupted", phases
PY
sleep 0.5
for child in $started; do
  # Gone, or a zombie (ended, not yet reaped by whoever inherited it).
  state=$(sed 's/.*) \(.\).*/\1/' "/proc/$child/stat" 2>/dev/null || echo gone)
  if [ "$state" != gone ] && [ "$state" != Z ]; then
    fail "process $child ($(tr '\0' ' ' <"/proc/$child/cmdline")) outlived the check"
  fi
done
echo "gpu_check_deadline: ok (deadline run $seconds s)"
