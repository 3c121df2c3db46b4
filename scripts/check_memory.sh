#!/usr/bin/env bash
# Resource bound of `gpucache pack`: packing an input far larger than memory keeps peak RSS under
# one shard plus 512 MiB. Generates a sparse .npy (default 8 GiB of f32, written as a header and a
# hole, so it costs no disk and no RAM to make), packs it with GNU time -v, samples
# /proc/PID/status (RssAnon: heap and shard buffer; RssFile: mapped input and output pages) every
# 0.2 s, prints the peaks, and exits 1 when the bound is broken.
#
#   scripts/check_memory.sh [INPUT_GIB]
#
# Settings: GPUCACHE_BUILD_DIR (default build/), GPUCACHE_MEMCHECK_DIR (scratch, default a fresh
# directory under /var/tmp; needs room for the output, about INPUT_GIB/2 GiB with --dtype f16),
# GPUCACHE_MEMCHECK_SHARD (shard size, default 1G), GPUCACHE_MEMCHECK_ARGS (extra pack arguments).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GPUCACHE_BUILD_DIR:-$root/build}
gib=${1:-8}
shard=${GPUCACHE_MEMCHECK_SHARD:-1G}
gpucache="$build_dir/src/cli/gpucache"
[ -x "$gpucache" ] || { echo "check_memory.sh: build first ($gpucache missing)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "check_memory.sh: GNU time is needed (apt-get install time)" >&2; exit 2; }

to_bytes() {
  local n=${1%[KMGkmg]} unit=${1##*[0-9]}
  case "$unit" in
    K | k) echo $((n << 10)) ;; M | m) echo $((n << 20)) ;; G | g) echo $((n << 30)) ;; *) echo "$n" ;;
  esac
}
shard_bytes=$(to_bytes "$shard")
limit_kib=$(((shard_bytes + (512 << 20)) / 1024))

scratch=${GPUCACHE_MEMCHECK_DIR:-$(mktemp -d /var/tmp/gpucache-memcheck.XXXXXX)}
mkdir -p "$scratch"
trap 'rm -rf "$scratch"' EXIT
input="$scratch/big.npy"
dim=1024
rows=$(((gib << 30) / (dim * 4)))

# numpy's .npy v1 header, padded so the data starts at byte 128, then a hole up to the full size.
header="{'descr': '<f4', 'fortran_order': False, 'shape': ($rows, $dim), }"
pad=$((128 - 10 - ${#header} - 1))
{
  printf '\x93NUMPY\x01\x00\x76\x00'
  printf '%s%*s\n' "$header" "$pad" ''
} >"$input"
[ "$(stat -c %s "$input")" -eq 128 ] || { echo "check_memory.sh: bad header size" >&2; exit 2; }
truncate -s $((128 + rows * dim * 4)) "$input"
echo "input: $input, $rows x $dim f32 = $(((rows * dim * 4) >> 20)) MiB (sparse: $(du -k "$input" | cut -f1) KiB on disk)"
echo "bound: peak RSS < shard size ($shard) + 512 MiB = $((limit_kib / 1024)) MiB"

# shellcheck disable=SC2086
/usr/bin/time -v -o "$scratch/time.txt" "$gpucache" pack "$input" -o "$scratch/out" --dtype f16 \
  --shard-size "$shard" --quiet ${GPUCACHE_MEMCHECK_ARGS:-} >"$scratch/pack.out" 2>&1 &
time_pid=$!
peak_anon=0 peak_file=0 peak_rss=0
while kill -0 "$time_pid" 2>/dev/null; do
  pid=$(pgrep -P "$time_pid" -x gpucache || true)
  if [ -n "$pid" ] && [ -r "/proc/$pid/status" ]; then
    read -r rss anon file < <(awk '/^VmRSS/ {r=$2} /^RssAnon/ {a=$2} /^RssFile/ {f=$2}
                                    END {print r+0, a+0, f+0}' "/proc/$pid/status" 2>/dev/null || echo "0 0 0")
    [ "$rss" -gt "$peak_rss" ] && peak_rss=$rss
    [ "$anon" -gt "$peak_anon" ] && peak_anon=$anon
    [ "$file" -gt "$peak_file" ] && peak_file=$file
  fi
  sleep 0.2
done
status=0
wait "$time_pid" || status=$?
cat "$scratch/pack.out"
[ "$status" -eq 0 ] || { echo "check_memory.sh: pack failed (exit $status)" >&2; cat "$scratch/time.txt" >&2; exit 2; }
max_kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$scratch/time.txt")
elapsed=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$scratch/time.txt")
echo "pack took $elapsed; peak RSS (time -v) $((max_kib / 1024)) MiB;" \
  "sampled peaks: VmRSS $((peak_rss / 1024)) MiB, RssAnon $((peak_anon / 1024)) MiB," \
  "RssFile $((peak_file / 1024)) MiB"
"$gpucache" verify "$scratch/out" --quiet >/dev/null || { echo "check_memory.sh: the packed dataset does not verify" >&2; exit 2; }
if [ "$max_kib" -ge "$limit_kib" ]; then
  echo "FAIL: peak RSS $((max_kib / 1024)) MiB >= bound $((limit_kib / 1024)) MiB"
  exit 1
fi
echo "ok: peak RSS $((max_kib / 1024)) MiB < bound $((limit_kib / 1024)) MiB"
