#!/usr/bin/env bash
# The GPU path checked in one command, from a bare GPU machine (no apt, no network): run from the
# repository root after scripts/gpu-prepare.sh filled .gpu/ on a Debian machine.
#   bash scripts/gpu-check.sh [OUTDIR]        # OUTDIR defaults to $OUT, else gpu-out/
# Phases, each timed, logged and recorded even when an earlier one failed (a phase that needs a
# failed one is recorded as skipped):
#   machine   what the machine has: GPU, driver, nvcc, cmake, ninja, python3, torch, C library
#   deps      .gpu/*.deb unpacked into a private prefix (dpkg-deb -x, else ar/tar, else Python),
#             never over /; CMake, pkg-config and the loader pointed at it; the carried libraries'
#             needs of the C library and libstdc++ compared with this machine's
#   configure CMake, Ninja, Release, the CUDA backend ON for the GPU found (native; sm_90 when no
#             GPU answers), HDF5 off (not carried)
#   build     every target on every core
#   ctest_gpu the tests labelled gpu (CUDA kernels bit-identical to their CPU references, device
#             load, pinned staging, the stream's copies, pack from device memory)
#   ctest     the rest of the C++ suite
#   pip       a venv over this machine's python3 (sees its torch, numpy, nanobind,
#             scikit-build-core), `pip install --no-build-isolation --no-index .`; built while the
#             C++ tests run
#   linkage   the installed extension holds no CUDA runtime of its own (tests/cuda_linkage.sh)
#   pytest    the Python tests, the CUDA ones included
#   bench     scripts/bench.sh --offline --only gpu (installs nothing) at sizes that fit
# OUTDIR receives summary.json, summary.txt, bench-results.json (when the bench ran) and
# logs.tar.gz (every log), written again after every phase and every 30 s during one, so a call
# killed at any moment still brings back the results so far.
# A deadline: the whole check ends within GPUCACHE_GPU_DEADLINE_S seconds (default 500: the device
# tool's call limit is 600, and a first call spends about 30 s starting the machine). Each phase
# runs for at most the time left minus GPUCACHE_GPU_RESERVE_S (default 45: the snapshot of a hang
# and writing the results); one cut short is recorded as `timeout`, and a later phase that cannot
# get its minimum (min_seconds below) is recorded as skipped (deadline). Before a phase (or one GPU
# test) is stopped, every process it runs is snapshot into logs/<name>.hang.log: state, wait
# channel, elapsed time, command; each thread's state, wchan and kernel stack; a user-space
# backtrace through eu-stack or gdb when the machine has one; a short excerpt goes into
# summary.txt. The GPU tests run one at a time, each for at most GPUCACHE_GPU_TEST_TIMEOUT_S
# seconds (default 120); their own watchdog (GPUCACHE_GPU_TEST_WATCHDOG_S, default 60, see
# tests/hang_watchdog.hpp) prints every thread's backtrace first.
# Environment: GPUCACHE_GPU_PREFIX (unpack folder, default /tmp/gpucache-gpu-deps),
# GPUCACHE_GPU_BUILD (build folder, default build-gpu), GPUCACHE_GPU_PYTHON (default python3),
# GPUCACHE_GPU_BENCH_ARGS (bench sizes), GPUCACHE_GPU_SKIP (comma-separated phases to skip, e.g.
# bench), the deadline variables above. For testing this script only: GPUCACHE_GPU_FAKE_HANG names
# a phase (or a GPU test) whose command is replaced by one that hangs (tests/gpu_check_deadline.sh).
# Exit status: 0 when no phase failed or timed out, 1 otherwise, 2 on a bad setting.
# The phases' functions run through phase/run_limited ("$@"), which shellcheck cannot follow.
# shellcheck disable=SC2317
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
out=${1:-${OUT:-$root/gpu-out}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpucache-check.XXXXXX")
logs=$work/logs
mkdir -p "$logs" "$work/excerpts" "$work/running"
results=$work/phases.tsv
: >"$results"
# The GPU tests' results, one line each (name, status, seconds, note), for the summary.
gpu_results=$work/gpu-tests.tsv
: >"$gpu_results"
prefix=${GPUCACHE_GPU_PREFIX:-/tmp/gpucache-gpu-deps}
build=${GPUCACHE_GPU_BUILD:-$root/build-gpu}
python=${GPUCACHE_GPU_PYTHON:-python3}
jobs=$(nproc)
skip=",${GPUCACHE_GPU_SKIP:-},"
fake_hang=${GPUCACHE_GPU_FAKE_HANG:-}
declare -A status_of
for setting in GPUCACHE_GPU_DEADLINE_S GPUCACHE_GPU_RESERVE_S GPUCACHE_GPU_TEST_TIMEOUT_S; do
  if [ -n "${!setting:-}" ] && ! [[ "${!setting}" =~ ^[0-9]+$ ]]; then
    echo "gpu-check: $setting='${!setting}' is not a whole number of seconds" >&2
    exit 2
  fi
done
deadline_s=${GPUCACHE_GPU_DEADLINE_S:-500}
reserve_s=${GPUCACHE_GPU_RESERVE_S:-45}
test_timeout_s=${GPUCACHE_GPU_TEST_TIMEOUT_S:-120}
started_s=$(date +%s)
end_at=$((started_s + deadline_s))
# The least time a phase needs to be worth starting; with less left it is skipped (deadline).
declare -A min_seconds=([machine]=5 [deps]=10 [configure]=10 [build]=60 [ctest_gpu]=20
  [pip]=60 [linkage]=5 [pytest]=20 [ctest]=20 [bench]=60)
# The most a quick phase may take, so that one hanging (nvidia-smi or torch.cuda on a wedged GPU,
# say) leaves the rest their time; the others have only the deadline.
declare -A max_seconds=([machine]=90 [deps]=120 [configure]=120 [linkage]=60)
# What stopping a GPU test takes: the snapshot (two user-space backtraces of up to 15 s each) and
# SIGTERM, 5 s, SIGKILL; a test is given its time less this, so its own snapshot is the one taken.
stop_allowance_s=40

say() { echo "gpu-check: $*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# record NAME STATUS SECONDS NOTE
record() {
  status_of[$1]=$2
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4//$'\t'/ }" >>"$results"
  printf 'gpu-check: %-9s %-7s %6.1f s  %s\n' "$1" "$2" "$3" "$4" >&2
}
# Seconds a phase may still run: the time to the deadline less the reserve.
budget() { echo $((end_at - $(date +%s) - reserve_s)); }

# --- processes, hangs and the results so far ------------------------------------------------------
# The pids under ROOT (not ROOT itself), from /proc (ps may be missing on a bare machine).
descendants() {
  local root=$1 file line pid ppid fields
  local -A children=()
  for file in /proc/[0-9]*/stat; do
    read -r line 2>/dev/null <"$file" || continue
    pid=${line%% *}
    read -ra fields <<<"${line##*) }"
    ppid=${fields[1]}
    children[$ppid]+=" $pid"
  done
  local queue=("$root") next
  while [ "${#queue[@]}" -gt 0 ]; do
    next=${queue[0]}
    queue=("${queue[@]:1}")
    for pid in ${children[$next]:-}; do
      echo "$pid"
      queue+=("$pid")
    done
  done
}
# One line for PID: pid, ppid, state, threads, elapsed seconds, wchan, command.
process_line() {
  local pid=$1 line fields uptime ticks
  read -r line 2>/dev/null <"/proc/$pid/stat" || return 1
  read -ra fields <<<"${line##*) }"
  read -r uptime _ </proc/uptime
  ticks=$(getconf CLK_TCK 2>/dev/null || echo 100)
  printf '%7s %7s %-5s %3s %8s  %-24s %s\n' "$pid" "${fields[1]}" "${fields[0]}" "${fields[17]}" \
    "$(awk -v u="$uptime" -v s="${fields[19]}" -v t="$ticks" 'BEGIN { printf "%.0f", u - s / t }')" \
    "$(cat "/proc/$pid/wchan" 2>/dev/null)" \
    "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-300)"
}
# snapshot LABEL ROOT: every process of the check (the phase's under ROOT marked), then for each
# of ROOT's processes (shell wrappers aside) each thread's state, wchan and kernel stack, and a
# user-space backtrace of the first few through eu-stack or gdb when the machine has one.
# Writes the full text to stdout and a short excerpt to excerpts/LABEL.txt.
snapshot() {
  local label=$1 root=$2 pid comm task tid line fields ticks
  local excerpt=$work/excerpts/$label.txt
  ticks=$(getconf CLK_TCK 2>/dev/null || echo 100)
  local phase_pids
  phase_pids=" $root $(descendants "$root" | tr '\n' ' ') "
  echo "=== $label: snapshot at $(date -u +%H:%M:%SZ), $(($(date +%s) - started_s)) s into the check"
  echo "--- every process of the check ('*': the stopped one's)"
  printf '  %7s %7s %-5s %3s %8s  %-24s %s\n' pid ppid state thr elapsed wchan command
  for pid in $$ $(descendants $$); do
    line=$(process_line "$pid") || continue
    [ -n "$line" ] || continue
    if [[ "$phase_pids" == *" $pid "* ]]; then echo "* $line"; else echo "  $line"; fi
  done
  : >"$excerpt"
  local detailed=0 traced=0
  for pid in $phase_pids; do
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
    case $comm in bash | sh | dash | env | timeout) continue ;; esac
    detailed=$((detailed + 1))
    [ "$detailed" -le 8 ] || { echo "--- process $pid ($comm): not detailed (8 already)"; continue; }
    echo "--- process $pid ($comm): $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-300)"
    local states=""
    for task in /proc/"$pid"/task/*; do
      tid=${task##*/}
      read -r line 2>/dev/null <"$task/stat" || continue
      read -ra fields <<<"${line##*) }"
      # utime + stime (stat fields 14, 15): a thread spinning has CPU time, a blocked one little.
      echo "thread $tid ($(cat "$task/comm" 2>/dev/null)): state ${fields[0]}, wchan $(cat "$task/wchan" 2>/dev/null), cpu $(((fields[11] + fields[12]) / ticks)) s"
      states+="${fields[0]}:$(cat "$task/wchan" 2>/dev/null) "
      if [ -r "$task/stack" ] && line=$(cat "$task/stack" 2>/dev/null) && [ -n "$line" ]; then
        echo "    ${line//$'\n'/$'\n'    }"
      else
        echo "    (kernel stack unreadable: not root?)"
      fi
    done
    echo "$pid $comm, $(($(wc -w <<<"$states"))) threads, state:wchan $(tr ' ' '\n' <<<"$states" |
      grep -v '^$' | sort | uniq -c | awk '{ printf "%s%s x%s", sep, $2, $1; sep = ", " }')" >>"$excerpt"
    # A user-space backtrace of the first two (gdb can take seconds per process), within the time
    # left to the deadline.
    if [ "$traced" -ge 2 ] || [ $((end_at - $(date +%s))) -le 25 ]; then continue; fi
    traced=$((traced + 1))
    if command -v eu-stack >/dev/null; then
      echo "user-space backtrace (eu-stack):"
      timeout -k 2 15 eu-stack -p "$pid" </dev/null 2>&1 | head -400
    elif command -v gdb >/dev/null; then
      echo "user-space backtrace (gdb):"
      timeout -k 2 15 gdb -p "$pid" -batch -nx -q -ex 'set pagination off' \
        -ex 'thread apply all bt 40' </dev/null 2>&1 | grep -vE '^\[(New LWP|Thread debugging)' | head -400
    else
      echo "(no eu-stack or gdb on this machine: no user-space backtrace from here)"
    fi
  done
  [ -s "$excerpt" ] || echo "no process left under the phase" >>"$excerpt"
}
# Stops ROOT and everything under it: TERM, 5 s, then KILL; names what would not die (a process
# in state D, blocked in a driver, cannot).
kill_tree() {
  local root=$1 pids pid alive
  pids="$root $(descendants "$root" | tr '\n' ' ')"
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null
  for _ in $(seq 25); do
    alive=""
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive+=" $pid"; done
    [ -n "$alive" ] || return 0
    sleep 0.2
  done
  echo "--- still running 5 s after SIGTERM:$alive; SIGKILL"
  # shellcheck disable=SC2086
  kill -KILL $alive 2>/dev/null
  sleep 1
  for pid in $alive; do
    kill -0 "$pid" 2>/dev/null && echo "NOT STOPPED: $(process_line "$pid")"
  done
  return 0
}
fake_hang_command() {
  echo "GPUCACHE_GPU_FAKE_HANG: this command only hangs (a test of gpu-check.sh itself)"
  sleep 100000
}
# run_limited SECONDS LABEL LOG COMMAND...: runs COMMAND (stdin /dev/null, output to LOG) for at
# most SECONDS. Past them: the snapshot into logs/LABEL.hang.log, everything under it stopped,
# the marker timed_out.LABEL, status 124. The outermost call refreshes the results every 30 s.
run_limited() {
  local limit=$1 label=$2 log=$3
  shift 3
  rm -f "$work/timed_out.$label"
  [ "$fake_hang" = "$label" ] && set -- fake_hang_command
  "$@" >"$log" 2>&1 </dev/null &
  local pid=$! now_s
  # In microseconds (bash 5's EPOCHREALTIME): whole seconds would cut up to one short.
  local stop_at=$((${EPOCHREALTIME/./} + limit * 1000000))
  local refresh_at=$(($(date +%s) + 30))
  while kill -0 "$pid" 2>/dev/null; do
    now_s=$(date +%s)
    if [ "${EPOCHREALTIME/./}" -ge "$stop_at" ]; then
      say "$label: still running after $limit s: snapshot, then stopped"
      echo "gpu-check: stopped after $limit s (its limit); snapshot in $label.hang.log" >>"$log"
      { snapshot "$label" "$pid"; kill_tree "$pid"; } >"$logs/$label.hang.log" 2>&1
      wait "$pid" 2>/dev/null
      : >"$work/timed_out.$label"
      return 124
    fi
    if [ "$BASH_SUBSHELL" = 0 ] && [ "$now_s" -ge "$refresh_at" ]; then
      write_results
      refresh_at=$((now_s + 30))
    fi
    sleep 0.2
  done
  wait "$pid"
}

# phase NAME NEEDS NOTE-FUNCTION COMMAND...: runs COMMAND with its output in logs/NAME.log, unless
# a phase named in NEEDS (comma-separated) did not pass, NAME is in GPUCACHE_GPU_SKIP or the time
# left before the deadline is under its minimum; for at most that time. The note function (or -)
# prints a one-line summary from the log. The results are written after it.
phase() {
  local name=$1 needs=$2 note_fn=$3
  shift 3
  # A phase that ran changes the results; a skipped one waits for the next write.
  run_phase "$name" "$needs" "$note_fn" "$@" && write_results
}
run_phase() {
  local name=$1 needs=$2 note_fn=$3
  shift 3
  local need
  for need in ${needs//,/ }; do
    if [ "${status_of[$need]:-}" != passed ]; then
      record "$name" skipped 0 "needs $need (${status_of[$need]:-not run})"
      return 1
    fi
  done
  if [[ "$skip" == *",$name,"* ]]; then
    record "$name" skipped 0 "GPUCACHE_GPU_SKIP"
    return 1
  fi
  local limit
  limit=$(budget)
  if [ "$limit" -lt "${min_seconds[$name]:-10}" ]; then
    record "$name" skipped 0 "(deadline) $limit s left before the reserve, needs ${min_seconds[$name]:-10}"
    return 1
  fi
  [ "$limit" -gt "${max_seconds[$name]:-$limit}" ] && limit=${max_seconds[$name]}
  say "$name ... (at most $limit s)"
  printf '%s\t%s\n' "$(date +%s)" "$limit" >"$work/running/$name"
  local begin code note=""
  begin=$(now)
  run_limited "$limit" "$name" "$logs/$name.log" "$@"
  code=$?
  rm -f "$work/running/$name"
  local seconds
  seconds=$(since "$begin")
  [ "$note_fn" != - ] && note=$("$note_fn" "$logs/$name.log" 2>/dev/null)
  if [ -e "$work/timed_out.$name" ]; then
    record "$name" timeout "$seconds" "stopped at its limit of $limit s${note:+; $note}; $(head -1 "$work/excerpts/$name.txt" 2>/dev/null); see logs/$name.hang.log"
  elif [ "$code" = 0 ]; then
    record "$name" passed "$seconds" "$note"
  else
    record "$name" failed "$seconds" "exit $code${note:+; $note}; last line: $(grep -v '^\s*$' "$logs/$name.log" | tail -1 | cut -c1-200)"
  fi
  return 0
}

# --- machine -------------------------------------------------------------------------------------
machine() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "kernel: $(uname -srm)"
  echo "cores: $jobs"
  echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null)"
  echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "nvcc: $(nvcc_path && "$(nvcc_path)" --version | tail -1)"
  echo "cmake: $(cmake --version 2>/dev/null | head -1)"
  echo "ninja: $(ninja --version 2>/dev/null)"
  echo "c++: $(c++ --version 2>/dev/null | head -1)"
  echo "pkg-config: $(command -v pkg-config || echo none)"
  echo "dpkg-deb: $(command -v dpkg-deb || echo none)"
  # What a hang's diagnosis can use here (snapshot, symbolize).
  local tool tools=""
  for tool in gdb eu-stack addr2line c++filt ps; do tools+=" $tool=$(command -v "$tool" >/dev/null && echo yes || echo no)"; done
  echo "diagnosis tools:$tools; kernel stacks $([ -r /proc/self/stack ] && cat /proc/self/stack >/dev/null 2>&1 && echo readable || echo unreadable); ptrace_scope $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo none); user $(id -un 2>/dev/null || id -u)"
  echo "python3: $("$python" -c 'import sys; print(sys.version.split()[0], sys.executable)' 2>&1)"
  "$python" - <<'EOF' 2>&1
import importlib
for name in ("torch", "numpy", "nanobind", "scikit_build_core", "safetensors", "pyarrow", "h5py",
             "pytest"):
    try:
        module = importlib.import_module(name)
        print(f"{name}: {getattr(module, '__version__', '?')}")
    except Exception as error:
        print(f"{name}: missing ({error})")
try:
    import torch
    print("torch.cuda:", torch.version.cuda, "available:", torch.cuda.is_available(),
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
except Exception:
    pass
EOF
}
nvcc_path() {
  command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; }
}
machine_note() { sed -n 's/^gpu: //p' "$1" | head -1; }

# --- deps ----------------------------------------------------------------------------------------
# Unpacks one .deb into $prefix: dpkg-deb, else ar and tar, else Python (ar and tarfile).
unpack_deb() {
  local deb=$1
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$deb" "$prefix" && return
  fi
  if command -v ar >/dev/null && command -v tar >/dev/null; then
    local scratch
    scratch=$(mktemp -d)
    (cd "$scratch" && ar x "$deb" && tar -xf data.tar.* -C "$prefix") && rm -rf "$scratch" && return
    rm -rf "$scratch"
  fi
  "$python" - "$deb" "$prefix" <<'EOF'
import io, sys, tarfile
deb, prefix = sys.argv[1], sys.argv[2]
data = open(deb, "rb").read()
assert data[:8] == b"!<arch>\n", f"{deb} is not an ar archive"
offset = 8
while offset < len(data):
    name = data[offset:offset + 16].decode().strip().rstrip("/")
    size = int(data[offset + 48:offset + 58].decode().strip())
    body = data[offset + 60:offset + 60 + size]
    if name.startswith("data.tar"):
        with tarfile.open(fileobj=io.BytesIO(body)) as archive:
            archive.extractall(prefix, filter="tar") if hasattr(tarfile, "data_filter") \
                else archive.extractall(prefix)
        break
    offset += 60 + size + (size & 1)
else:
    sys.exit(f"{deb}: no data.tar member")
EOF
}
multiarch=x86_64-linux-gnu
deps() {
  local debs=("$root"/.gpu/*.deb)
  if [ ! -f "${debs[0]}" ]; then
    echo "no .gpu/*.deb: run scripts/gpu-prepare.sh on a Debian 12 machine and carry .gpu"
    return 1
  fi
  case "$prefix" in /|/usr|/usr/*|/lib*|/bin*|/etc*) echo "refusing to unpack into $prefix"; return 1 ;; esac
  rm -rf "$prefix"
  mkdir -p "$prefix"
  local deb
  for deb in "${debs[@]}"; do
    echo "unpack $(basename "$deb")"
    unpack_deb "$deb" || { echo "could not unpack $deb"; return 1; }
  done
  # Some -dev packages link with absolute targets (zlib1g-dev: usr/lib/.../libz.so ->
  # /lib/.../libz.so.1.2.13): on this machine those dangle or reach its own copy, and FindZLIB
  # then took libz.a, which cannot go into a shared object. Pointed into the prefix instead.
  local link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    if [[ "$target" == /* ]] && [ -e "$prefix$target" ]; then
      ln -sfn "$prefix$target" "$link"
      echo "relinked ${link#"$prefix"} -> $prefix$target"
    fi
  done < <(find "$prefix" -type l -print0)
  # Debian's .pc files say prefix=/usr: pkg-config reads only ours, relocated by the sysroot.
  # Some Debian CMake package files name /usr literally (Snappy's targets list /usr/lib/...;
  # doctest's set _IMPORT_PREFIX to "/usr", which CMake then drops as an implicit include
  # folder): relocated.
  local relocated file
  relocated=$(grep -rlE '"/usr(/|")' "$prefix/usr" --include='*.cmake' 2>/dev/null)
  for file in $relocated; do
    sed -i -e "s#\"/usr/#\"$prefix/usr/#g" -e "s#\"/usr\"#\"$prefix/usr\"#g" "$file"
    echo "relocated $file"
  done
  # Runtime libraries this machine lacks (by soname) are reached through runtime-libs/, on
  # LD_LIBRARY_PATH; those it has stay its own, so no program here loads Debian's copy instead.
  mkdir -p "$prefix/runtime-libs"
  local library soname
  for library in "$prefix"/usr/lib/"$multiarch"/*.so.*; do
    soname=$(basename "$library")
    [[ "$soname" =~ \.so\.[0-9]+$ ]] || continue
    if command -v ldconfig >/dev/null && ldconfig -p 2>/dev/null | grep -q "^\s*$soname "; then
      echo "$soname: this machine's"
    else
      ln -sf "$library" "$prefix/runtime-libs/$soname"
      echo "$soname: carried"
    fi
  done
  # The carried shared libraries against this machine's C and C++ libraries: a newer symbol
  # version than the machine has means they cannot load here.
  local have_glibc need_glibc have_cxx need_cxx file mismatch=0
  have_glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
  have_cxx=$(objdump -T "$(c++ -print-file-name=libstdc++.so.6 2>/dev/null)" 2>/dev/null |
    sed -n 's/.*GLIBCXX_\([0-9.]*\).*/\1/p' | sort -V | tail -1)
  command -v objdump >/dev/null || echo "no objdump: the carried libraries' needs are not checked"
  for file in "$prefix"/usr/lib/"$multiarch"/*.so.* "$prefix"/usr/bin/pkgconf; do
    [ -f "$file" ] && [ ! -L "$file" ] || continue
    need_glibc=$(objdump -T "$file" 2>/dev/null | sed -n 's/.*GLIBC_\([0-9.]*\).*/\1/p' | sort -V | tail -1)
    need_cxx=$(objdump -T "$file" 2>/dev/null | sed -n 's/.*GLIBCXX_\([0-9.]*\).*/\1/p' | sort -V | tail -1)
    echo "$(basename "$file"): needs glibc ${need_glibc:-none}, libstdc++ ${need_cxx:-none}"
    if [ -n "$need_glibc" ] && [ "$(printf '%s\n%s\n' "$need_glibc" "$have_glibc" | sort -V | tail -1)" != "$have_glibc" ]; then
      echo "MISMATCH: $(basename "$file") needs GLIBC_$need_glibc, this machine has glibc $have_glibc"
      mismatch=1
    fi
    if [ -n "$need_cxx" ] && [ -n "$have_cxx" ] && [ "$(printf '%s\n%s\n' "$need_cxx" "$have_cxx" | sort -V | tail -1)" != "$have_cxx" ]; then
      echo "MISMATCH: $(basename "$file") needs GLIBCXX_$need_cxx, this machine's libstdc++ has $have_cxx"
      mismatch=1
    fi
  done
  echo "machine: glibc $have_glibc, libstdc++ GLIBCXX_${have_cxx:-?}"
  [ "$mismatch" = 0 ] || { echo "carried libraries are newer than this machine's C/C++ libraries"; return 1; }
  "$PKG_CONFIG" --exists libxxhash liblz4 || { echo "pkg-config cannot find the carried .pc files"; return 1; }
}
deps_note() {
  if grep -q MISMATCH "$1"; then grep MISMATCH "$1" | head -2 | tr '\n' ' '; else
    echo "$(grep -c '^unpack' "$1") packages into $prefix; $(tail -1 "$1")"; fi
}
export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export PKG_CONFIG_LIBDIR="$prefix/usr/lib/$multiarch/pkgconfig:$prefix/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR=$prefix
export LD_LIBRARY_PATH="$prefix/runtime-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# ccache, where the machine has it and no launcher was chosen: the Python package's build then
# reuses the C++ build's objects (both build folders sit at the same depth under CCACHE_BASEDIR).
if command -v ccache >/dev/null && [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ]; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache \
    CMAKE_CUDA_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
fi
if command -v pkg-config >/dev/null; then
  export PKG_CONFIG=${PKG_CONFIG:-$(command -v pkg-config)}
else
  export PKG_CONFIG=$prefix/usr/bin/pkgconf
fi

# The CUDA runtime must be found by its soname (gpucache loads it at run time, as PyTorch's
# would be): when the loader's cache lacks it, the toolkit's folder goes on LD_LIBRARY_PATH.
cudart_dir() {
  local nvcc dir
  nvcc=$(nvcc_path) || return 1
  for dir in "$(dirname "$nvcc")/../lib64" "$(dirname "$nvcc")/../targets/x86_64-linux/lib"; do
    ls "$dir"/libcudart.so.* >/dev/null 2>&1 && { (cd "$dir" && pwd); return 0; }
  done
  return 1
}
if ! ldconfig -p 2>/dev/null | grep -q "libcudart\.so\." && dir=$(cudart_dir); then
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$dir"
fi

# --- configure and build -------------------------------------------------------------------------
cuda_architectures() {
  if nvidia-smi -L >/dev/null 2>&1; then echo native; else echo 90-real; fi
}
configure() {
  local nvcc
  nvcc=$(nvcc_path)
  local args=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_PREFIX_PATH=$prefix/usr" "-DPKG_CONFIG_EXECUTABLE=$PKG_CONFIG"
    -DGPUCACHE_HDF5=OFF "-DCMAKE_CUDA_ARCHITECTURES=$(cuda_architectures)"
    # The gpu tests trace their CUDA calls (GPUCACHE_DEBUG_CUDA) into the logs that come back.
    "-DGPUCACHE_CUDA_TRACE_DIR=$logs")
  if [ -n "$nvcc" ]; then
    args+=(-DGPUCACHE_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc")
  else
    echo "no nvcc: building without the CUDA backend"
    args+=(-DGPUCACHE_CUDA=OFF)
  fi
  cmake "${args[@]}"
}
configure_note() { grep -E "gpucache: CUDA backend|no CUDA compiler" "$1" | head -1 | sed 's/^-- //'; }
build_note() { grep -cE '^\[[0-9]+/[0-9]+\]' "$1" | sed 's/$/ steps/'; }

# --- tests ---------------------------------------------------------------------------------------
ctest_note() {
  local summary
  summary=$(grep -E "tests passed|tests failed" "$1" | tail -1)
  echo "$summary; skipped $(grep -c 'Not Run\|Skipped' "$1")"
  grep -E '\*\*\*Failed|\(Failed\)|\(Timeout\)|Exception' "$1" | sed 's/.* - //' | head -5 | tr '\n' ' '
}
# The gpu-labelled tests, one at a time, each run directly (as ctest would: its command, folder
# and environment from `ctest --show-only=json-v1`) so that its output streams into
# logs/<test>.log as it runs (ctest shows a test's output only when it ends, and its --timeout
# gives way to the tests' TIMEOUT property), each for at most GPUCACHE_GPU_TEST_TIMEOUT_S seconds
# with a snapshot before it is stopped. One line per test in gpu-tests.tsv.
gpu_test_commands() {
  if ! ctest --test-dir "$build" -L gpu --show-only=json-v1 >"$work/gpu-tests.json" ||
    ! [ -s "$work/gpu-tests.json" ]; then
    # Without ctest's list: the test binaries as built, run from their folder as ctest would.
    local binary
    for binary in "$build"/tests/test_gpu_*; do
      [ -x "$binary" ] && printf '%s\tcd %q && exec %q\n' "${binary##*/}" "$build/tests" "$binary"
    done
    return 0
  fi
  "$python" - "$work/gpu-tests.json" <<'EOF'
import json, shlex, sys
for test in json.load(open(sys.argv[1]))["tests"]:
    properties = {p["name"]: p["value"] for p in test.get("properties", [])}
    folder = properties.get("WORKING_DIRECTORY") or "."
    environment = properties.get("ENVIRONMENT") or []
    command = f"cd {shlex.quote(folder)} && exec env {shlex.join(environment)} {shlex.join(test['command'])}"
    print(f"{test['name']}\t{command}")
EOF
}
# The frames a backtrace could not name ("binary(+0xOFFSET)": functions a binary does not
# export), named by addr2line from the binaries' symbol tables while they are on this machine.
symbolize() {
  local log=$1 file offset name place
  command -v addr2line >/dev/null || { echo "(no addr2line here: unnamed frames stay offsets)"; return 0; }
  grep -oE '^[^ (]+\(\+0x[0-9a-f]+\)' "$log" | sort -u | head -300 >"$work/frames"
  [ -s "$work/frames" ] || return 0
  echo "gpu-check: the unnamed frames above, named by addr2line:"
  for file in $(sed 's/(.*//' "$work/frames" | sort -u); do
    [ -f "$file" ] || continue
    grep -F "$file(" "$work/frames" | sed 's/.*(+\(0x[0-9a-f]*\))/\1/' >"$work/offsets"
    # shellcheck disable=SC2046
    paste -d '\t' "$work/offsets" <(addr2line -f -C -e "$file" $(cat "$work/offsets") | paste - -) |
      while IFS=$'\t' read -r offset name place; do
        echo "  $file(+$offset) = $name${place:+  @ $place}"
      done
  done
}
# The watchdog's report, shortened for summary.txt: each thread's line and its first frames past
# the signal handler (named from the frame, else from addr2line's names in SYMBOLIZED, demangled
# by c++filt when there is one), at most 4 a thread and 14 lines in all.
watchdog_excerpt() {
  local log=$1 symbolized=$2
  awk -v names="$symbolized" '
    BEGIN { while ((getline line < names) > 0) if (line ~ /^  [^ ]+\(\+0x[0-9a-f]+\) = /) {
              split(substr(line, 3), parts, " = "); sub(/  @ .*$/, "", parts[2]); name[parts[1]] = parts[2] } }
    /^gpu test: watchdog: .* still running/ { on = 1; next }
    /^gpu test: watchdog: executable mappings/ { on = 0 }
    on && /^--- thread / { print; frames = 0; next }
    on && frames < 4 && /^[^ ]+\(.*\) ?(\[0x[0-9a-f]+\])?$/ {
      frame = $0; sub(/ ?\[0x[0-9a-f]+\]$/, "", frame)
      file = frame; sub(/\(.*$/, "", file); sub(/.*\//, "", file)
      what = frame; sub(/^[^(]*\(/, "", what); sub(/\)$/, "", what)
      if (what ~ /^\+0x/) what = (frame in name) ? name[frame] : what
      sub(/\+0x[0-9a-f]+$/, "", what)
      if (what ~ /print_own_backtrace|__restore_rt|^killpg$/) next
      print "    " what " (" file ")"; frames++ }' "$log" |
    awk '/^--- thread / { started = 1 } started' | { command -v c++filt >/dev/null && c++filt || cat; } |
    head -14
}
ctest_gpu() {
  local listing name command limit begin code status note seconds failed=0 gpu_answers=0
  nvidia-smi -L >/dev/null 2>&1 && gpu_answers=1
  listing=$(gpu_test_commands) || { echo "ctest could not list the gpu tests"; return 1; }
  [ -n "$listing" ] || { echo "no gpu-labelled tests in $build"; return 1; }
  echo "watchdog per test case: ${GPUCACHE_GPU_TEST_WATCHDOG_S:-60} s (GPUCACHE_GPU_TEST_WATCHDOG_S); per test: $test_timeout_s s (GPUCACHE_GPU_TEST_TIMEOUT_S)"
  while IFS=$'\t' read -r name command; do
    limit=$(($(budget) - stop_allowance_s))
    if [ "$limit" -lt 10 ]; then
      printf '%s\tskipped\t0\t(deadline) %s s left\n' "$name" "$limit" >>"$gpu_results"
      echo "=== $name: skipped (deadline)"
      failed=1
      continue
    fi
    [ "$limit" -gt "$test_timeout_s" ] && limit=$test_timeout_s
    echo "=== $name (at most $limit s): $command"
    begin=$(now)
    run_limited "$limit" "$name" "$logs/$name.log" bash -c "$command"
    code=$?
    seconds=$(since "$begin")
    cat "$logs/$name.log"
    note=$(grep -E '^gpu test: (start|end) ' "$logs/$name.log" | tail -1 | cut -c1-160)
    if [ -e "$work/timed_out.$name" ]; then
      status=timeout
      note="stopped at $limit s; last: ${note:-no test case started}; $(head -1 "$work/excerpts/$name.txt")"
    elif [ "$code" = 0 ]; then
      status=passed
      note="$(grep -c '^gpu test: end [^/]* ([0-9.]* s, passed)' "$logs/$name.log") cases passed"
    elif [ "$code" = 77 ] && [ "$gpu_answers" = 1 ]; then
      # On a machine with a GPU, a GPU test that skipped is a failure of the check, not a pass.
      status=failed
      note="skipped though a GPU answers (nvidia-smi): $(grep 'skipping GPU tests' "$logs/$name.log" | head -1)"
    elif [ "$code" = 77 ]; then
      status=skipped
      note=$(grep 'skipping GPU tests' "$logs/$name.log" | head -1)
    elif [ "$code" = 3 ] && grep -q '^gpu test: watchdog: ' "$logs/$name.log"; then
      status=failed
      note="hang: $(grep -m1 '^gpu test: watchdog: ' "$logs/$name.log" | sed 's/^gpu test: watchdog: //; s/; the .*//')"
    else
      status=failed
      note="exit $code; $(grep -E '^gpu test: end .*failed\)|ERROR:|^gpu test: (crash|exception)' "$logs/$name.log" | head -2 | tr '\n' ' ' | cut -c1-200)"
    fi
    [ "$status" = passed ] || [ "$status" = skipped ] || failed=1
    if [ "$status" != passed ] && [ "$status" != skipped ]; then
      symbolize "$logs/$name.log" >"$work/symbolized" 2>&1
      if [[ "$note" == hang:* ]]; then
        watchdog_excerpt "$logs/$name.log" "$work/symbolized" >"$work/excerpts/$name.txt"
      fi
      cat "$work/symbolized" >>"$logs/$name.log"
      [ ! -f "$logs/$name.hang.log" ] || symbolize "$logs/$name.hang.log" >>"$logs/$name.hang.log" 2>&1
    fi
    printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$seconds" "${note//$'\t'/ }" >>"$gpu_results"
    echo "=== $name: $status ($seconds s) $note"
  done <<<"$listing"
  return "$failed"
}
gpu_tests_note() {
  awk -F'\t' '{ n[$2]++ } $2 != "passed" { bad = bad sep $1 " " $2; sep = ", " }
    END { for (s in n) { printf "%s%d %s", sep2, n[s], s; sep2 = ", " } if (bad) printf "; %s", bad }' "$gpu_results"
}
ctest_rest() {
  ctest --test-dir "$build" -LE gpu --output-on-failure --parallel "$jobs" --timeout 300 \
    --output-junit "$logs/ctest.xml"
}

venv=$build-venv
pip_install() {
  rm -rf "$venv"
  # Without pip of its own (ensurepip may be missing): the machine's pip is reached like its torch.
  "$python" -m venv --system-site-packages --without-pip "$venv" || return 1
  # The machine's python3 may itself be a venv (/opt/torch/.venv), whose packages a venv made with
  # --system-site-packages would not see: its site-packages go on the path through a .pth file.
  local site
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$python" -c 'import site, sys; print("\n".join(p for p in site.getsitepackages() + [site.getusersitepackages()] if p))' \
    >"$site/machine-site-packages.pth"
  cat "$site/machine-site-packages.pth"
  "$venv/bin/python" -c "import torch, numpy, nanobind, scikit_build_core; print('torch', torch.__version__)" || return 1
  CUDAARCHS=$(cuda_architectures) CMAKE_BUILD_PARALLEL_LEVEL=$jobs \
    CMAKE_ARGS="-DGPUCACHE_HDF5=OFF -DPKG_CONFIG_EXECUTABLE=$PKG_CONFIG" \
    "$venv/bin/python" -m pip install --no-build-isolation --no-index --no-deps \
    --disable-pip-version-check -v --config-settings="build-dir=$build-python" "$root"
}
pip_note() { grep -oE "Successfully installed [^ ]+" "$1" | tail -1; }
linkage() {
  local extension
  extension=$("$venv/bin/python" -c 'import gpucache._gpucache as m; print(m.__file__)') || return 1
  bash "$root/tests/cuda_linkage.sh" "$(dirname "$extension")/libgpucache_cuda_kernels.so" \
    "$extension" "$venv/bin/gpucache"
}
linkage_note() { tail -1 "$1"; }
# -v -u: each test's name is in the log (unbuffered) before it runs; faulthandler_timeout: a test
# past 60 s has every Python thread's traceback dumped into the log.
pytest_run() {
  GPUCACHE_BUILD_DIR=$build "$venv/bin/python" -u -m pytest -v -p no:cacheprovider -rs \
    -o faulthandler_timeout=60 --junitxml="$logs/pytest.xml" "$root/src/python/tests"
}
pytest_note() { grep -E "passed|failed|error" "$1" | tail -1; }

# --- bench ---------------------------------------------------------------------------------------
bench() {
  # shellcheck disable=SC2086
  GPUCACHE_BUILD_DIR=$build GPUCACHE_BENCH_PYTHON=$venv/bin/python \
    bash "$root/scripts/bench.sh" --offline --only gpu --out "$work/bench" \
    ${GPUCACHE_GPU_BENCH_ARGS:---size 512M --reps 3 --slow-reps 1 --dialogue-rows 20000 --llm-rows 10000}
}
bench_note() { grep -E "^bench: GPU|done in" "$1" | tail -1; }

# --- results -------------------------------------------------------------------------------------
# summary.json, summary.txt and logs.tar.gz in OUTDIR from what has been recorded so far (phases
# done, the one running, the GPU tests, hang excerpts), each written under a temporary name and
# renamed, so a call killed while they are written still leaves the previous ones whole.
# --print: the summary table on stderr too.
write_results() {
  [ -f "$work/bench/results.json" ] && cp "$work/bench/results.json" "$out/bench-results.json"
  [ -f "$work/bench/results.md" ] && cp "$work/bench/results.md" "$logs/bench-results.md"
  if ! "$python" - "$work" "$out" "$started_s" "$deadline_s" "$reserve_s" "${1:-}" <<'EOF' >&2
import json, re, sys, time, xml.etree.ElementTree as ET
from pathlib import Path
work, out = Path(sys.argv[1]), Path(sys.argv[2])
started, deadline, reserve, show = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
logs = work / "logs"
total = time.time() - started
def rows(path, width):
    if not path.exists():
        return []
    return [(line.split("\t") + [""] * width)[:width] for line in path.read_text().splitlines() if line]
phases = [{"phase": name, "status": status, "seconds": round(float(seconds or 0), 1), "note": note}
          for name, status, seconds, note in rows(work / "phases.tsv", 4)]
for running in sorted((work / "running").glob("*")) if (work / "running").is_dir() else []:
    since, limit = (running.read_text().split("\t") + ["", ""])[:2]
    phases.append({"phase": running.name, "status": "running",
                   "seconds": round(time.time() - float(since or started), 1),
                   "note": f"still running when these results were written (limit {limit.strip()} s)"})
def junit(name):
    path = logs / name
    if not path.exists():
        return None
    cases = []
    try:
        tree = ET.parse(path)
    except ET.ParseError:
        return {"error": f"{name} unreadable (written when the phase was stopped?)"}
    for case in tree.iter("testcase"):
        status = case.get("status") or "passed"
        if case.find("failure") is not None or case.find("error") is not None:
            status = "failed"
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            status = "skipped"
        elif status == "run":
            status = "passed"
        cases.append({"name": f"{case.get('classname', '')}::{case.get('name')}".strip(":"),
                      "status": status, "seconds": float(case.get("time") or 0)})
    counts = {}
    for case in cases:
        counts[case["status"]] = counts.get(case["status"], 0) + 1
    return {"counts": counts, "not_passed": [c for c in cases if c["status"] != "passed"]}
# The GPU tests: gpu-check's line for each, and the cases from the listener's lines in its log
# ("gpu test: start <case>", "gpu test: end <case> (<s> s, passed|failed)"); a case started and
# not ended is where the test was when it ended or was stopped.
gpu_tests = []
for name, status, seconds, note in rows(work / "gpu-tests.tsv", 4):
    cases, open_cases = [], []
    log = logs / f"{name}.log"
    for line in (log.read_text(errors="replace").splitlines() if log.exists() else []):
        match = re.match(r"gpu test: (start|end) (.*?)(?: \(([0-9.]+) s(?:, (\w+))?\))?$", line)
        if not match:
            continue
        kind, place, case_seconds, case_status = match.groups()
        if kind == "start":
            open_cases.append(place)
        else:
            if place in open_cases:
                open_cases.remove(place)
            if "/" not in place:
                cases.append({"name": place, "status": case_status or "", "seconds": float(case_seconds or 0)})
    gpu_tests.append({"name": name, "status": status, "seconds": round(float(seconds or 0), 1),
                      "note": note, "cases": cases, "unfinished": open_cases})
hangs = {}
for excerpt in sorted((work / "excerpts").glob("*.txt")):
    hangs[excerpt.stem] = excerpt.read_text(errors="replace").splitlines()[:12]
machine = {}
machine_log = logs / "machine.log"
if machine_log.exists():
    for line in machine_log.read_text(errors="replace").splitlines():
        if ": " in line:
            key, value = line.split(": ", 1)
            machine.setdefault(key, value)
bench = {}
bench_path = out / "bench-results.json"
if bench_path.exists():
    data = json.loads(bench_path.read_text())
    bench = {"device": data.get("gpu", {}).get("device"),
             "comparisons": [{k: c.get(k) for k in ("id", "title", "status", "ratio", "reason",
                                                     "subject", "peer")}
                             for c in data.get("comparisons", [])],
             "errors": data.get("errors", [])}
finished = (work / "finished").exists()
summary = {"finished": finished, "total_seconds": round(total, 1),
           "deadline_seconds": deadline, "reserve_seconds": reserve,
           "ok": finished and all(p["status"] not in ("failed", "timeout", "interrupted") for p in phases),
           "complete": finished and not any(p["note"].startswith("(deadline)") for p in phases),
           "machine": machine, "phases": phases, "hangs": hangs,
           "tests": {"ctest_gpu": gpu_tests, "ctest": junit("ctest.xml"), "pytest": junit("pytest.xml")},
           "bench": bench}
def write(name, text):
    temporary = out / f".{name}.part"
    temporary.write_text(text)
    temporary.replace(out / name)
write("summary.json", json.dumps(summary, indent=1) + "\n")
state = ("ok" if summary["ok"] else "FAILED") if finished else "PARTIAL"
lines = [f"gpucache gpu-check, {machine.get('date', '')}: {machine.get('gpu') or 'no GPU'}"
         f" (deadline {deadline} s, reserve {reserve} s)",
         f"{'phase':<10} {'status':<8} {'seconds':>8}  note"]
for p in phases:
    lines.append(f"{p['phase']:<10} {p['status']:<8} {p['seconds']:>8.1f}  {p['note'][:200]}")
cut = [p["phase"] for p in phases if p["note"].startswith("(deadline)")]
lines.append(f"{'total':<10} {state:<8} {total:>8.1f}"
             + ("" if finished else "  (results so far: the check was still running)")
             + (f"  (incomplete: {', '.join(cut)} skipped by the deadline)" if cut else ""))
for test in gpu_tests:
    where = f"; unfinished: {', '.join(test['unfinished'])}" if test["unfinished"] else ""
    lines.append(f"gpu test {test['name']}: {test['status']} {test['seconds']:.1f} s "
                 f"{test['note']}{where}"[:300])
for label, excerpt in hangs.items():
    source = f"logs/{label}.hang.log" if (logs / f"{label}.hang.log").exists() else f"logs/{label}.log"
    lines.append(f"hang in {label} ({source}):")
    lines.extend(f"  {line[:200]}" for line in excerpt)
for comparison in bench.get("comparisons", []):
    lines.append(f"bench {comparison['id']}: {comparison['status']} "
                 f"{comparison.get('ratio') if comparison.get('ratio') is not None else ''} "
                 f"{comparison.get('reason') or ''}"[:200])
write("summary.txt", "\n".join(lines) + "\n")
if show:
    print("\n".join(lines))
EOF
  then
    # Without a working Python, the phases' lines at least.
    { echo "gpucache gpu-check (summary.json not written: $python failed)"
      cat "$results"; } >"$out/.summary.txt.part" && mv -f "$out/.summary.txt.part" "$out/summary.txt"
  fi
  # Every log, within the device tool's 16 MiB a file: when the archive would be larger, logs over
  # 1 MiB go in as their first 256 KiB and last 1 MiB.
  tar -czf "$out/.logs.tar.gz.part" -C "$work" logs 2>/dev/null
  if [ "$(stat -c %s "$out/.logs.tar.gz.part" 2>/dev/null || echo 0)" -gt $((15 * 1024 * 1024)) ]; then
    rm -rf "$work/trimmed" && cp -r "$logs" "$work/trimmed"
    local file
    while IFS= read -r -d '' file; do
      { head -c 262144 "$file"; printf '\n[... gpu-check: cut to fit the 16 MiB limit ...]\n'
        tail -c 1048576 "$file"; } >"$file.cut" && mv "$file.cut" "$file"
    done < <(find "$work/trimmed" -type f -size +1M -print0)
    tar -czf "$out/.logs.tar.gz.part" -C "$work" --transform 's,^trimmed,logs,' trimmed 2>/dev/null
  fi
  mv -f "$out/.logs.tar.gz.part" "$out/logs.tar.gz"
}
# Killed by a signal it can catch (the caller's time is up): the phase running is recorded as
# interrupted, the results so far written, everything the check started stopped.
on_signal() {
  trap - TERM INT
  say "SIG$1: writing the results so far"
  local running name
  for running in "$work"/running/*; do
    [ -e "$running" ] || continue
    name=${running##*/}
    record "$name" interrupted "$(($(date +%s) - $(cut -f1 "$running")))" "SIG$1 while it ran"
    rm -f "$running"
  done
  write_results
  # shellcheck disable=SC2046
  kill -TERM $(descendants $$) 2>/dev/null
  exit 143
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT

# --- run -----------------------------------------------------------------------------------------
say "deadline $deadline_s s (GPUCACHE_GPU_DEADLINE_S), reserve $reserve_s s; results into $out"
phase machine "" machine_note machine
phase deps "" deps_note deps
phase configure deps configure_note configure
# -k 0: one target that fails to compile (a newer compiler here than Debian's) must not hide the
# rest; the tests and the package still run, and ctest reports what did not build as "Not Run".
phase build configure build_note cmake --build "$build" --parallel "$jobs" -- -k 0
# The Python package builds while the GPU tests run (they wait on the GPU, not the cores), for at
# most the time that leaves pytest its minimum; then it is waited for.
pip_background=""
pip_begin=$(now)
pip_limit=$(($(budget) - min_seconds[pytest]))
if [ "${status_of[configure]}" = passed ] && [[ "$skip" != *",pip,"* ]] &&
  [ "$pip_limit" -ge "${min_seconds[pip]}" ]; then
  say "pip (in the background, at most $pip_limit s) ..."
  printf '%s\t%s\n' "$(date +%s)" "$pip_limit" >"$work/running/pip"
  (
    run_limited "$pip_limit" pip "$logs/pip.log" pip_install
    echo $? >"$work/pip.code"
  ) &
  pip_background=$!
fi
phase ctest_gpu configure gpu_tests_note ctest_gpu
if [ -n "$pip_background" ]; then
  say "waiting for pip ..."
  refresh_at=$(($(date +%s) + 30))
  while kill -0 "$pip_background" 2>/dev/null; do
    sleep 0.5
    if [ "$(date +%s)" -ge "$refresh_at" ]; then
      write_results
      refresh_at=$(($(date +%s) + 30))
    fi
  done
  wait "$pip_background"
  rm -f "$work/running/pip"
  code=$(cat "$work/pip.code" 2>/dev/null || echo "?")
  seconds=$(since "$pip_begin")
  if [ -e "$work/timed_out.pip" ]; then
    record pip timeout "$seconds" "stopped at its limit of $pip_limit s; $(head -1 "$work/excerpts/pip.txt" 2>/dev/null); see logs/pip.hang.log"
  elif [ "$code" = 0 ]; then
    record pip passed "$seconds" "$(pip_note "$logs/pip.log") (beside the GPU tests)"
  else
    record pip failed "$seconds" "exit $code; last line: $(tail -1 "$logs/pip.log" | cut -c1-200)"
  fi
  write_results
else
  phase pip build pip_note pip_install
fi
phase linkage pip linkage_note linkage
phase pytest pip pytest_note pytest_run
# The rest of the C++ suite (CI runs it on every change): after the GPU's own tests.
phase ctest configure ctest_note ctest_rest
phase bench pip bench_note bench

# --- summary -------------------------------------------------------------------------------------
: >"$work/finished"
write_results --print
say "wrote $out/summary.json, summary.txt, logs.tar.gz"
grep -qE "	(failed|timeout)	" "$results" && exit 1
exit 0
