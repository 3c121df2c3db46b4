#!/usr/bin/env bash
# Resource bound of `gpucache pack`: peak RSS stays under one shard plus 512 MiB, whatever the
# input's size and row count. Streams a .npy of f32 rows to disk (a block of pseudo-random rows
# repeated: rows must be non-zero or validation drops them, so a sparse file will not do), packs
# it to f16 with GNU time -v while sampling /proc/PID/status (RssAnon: heap and shard buffers;
# RssFile: pages of mapped files) every 0.2 s, prints the peaks and a trace, measures `gpucache
# verify` of the result the same way (reported, not bounded), and exits 1 when pack breaks the
# bound.
#
#   scripts/check_memory.sh [INPUT_GIB]        INPUT_GIB GiB (default 8) of [N, 1024] rows
#   scripts/check_memory.sh --rows N [--dim D] N rows of D values (default 16): many small rows,
#                                              where per-row bookkeeping dominates (issue #18:
#                                              --rows 100000000 writes 3.2 GB)
#
# Settings: GPUCACHE_BUILD_DIR (default build/), GPUCACHE_MEMCHECK_DIR (scratch, default a fresh
# directory under /var/tmp; needs the input plus half of it for the f16 output, plus pack's
# row bookkeeping files: about 21 bytes a row), GPUCACHE_MEMCHECK_SHARD (shard size, default 1G),
# GPUCACHE_MEMCHECK_ARGS (extra pack arguments).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GPUCACHE_BUILD_DIR:-$root/build}
gib=8
rows=
dim=1024
while [ $# -gt 0 ]; do
  case "$1" in
    --rows) rows=$2; dim=16; shift 2 ;;
    --dim) dim_arg=$2; shift 2 ;;
    *) gib=$1; shift ;;
  esac
done
[ -n "${dim_arg:-}" ] && dim=$dim_arg
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
[ -n "$rows" ] || rows=$(((gib << 30) / (dim * 4)))

# numpy's .npy v1 header, padded so the data starts at byte 128, then the rows, streamed.
header="{'descr': '<f4', 'fortran_order': False, 'shape': ($rows, $dim), }"
pad=$((128 - 10 - ${#header} - 1))
{
  printf '\x93NUMPY\x01\x00\x76\x00'
  printf '%s%*s\n' "$header" "$pad" ''
} >"$input"
[ "$(stat -c %s "$input")" -eq 128 ] || { echo "check_memory.sh: bad header size" >&2; exit 2; }
# 256 rows of uniform values in [-1, 1) (L2 norm about sqrt(dim / 3)), repeated.
perl -e 'my ($rows, $dim) = @ARGV; srand(7);
  my $block = pack("f<*", map { rand(2) - 1 } 1 .. 256 * $dim);
  my $chunk = $block x (65536 / 256); my $full = int($rows / 65536);
  print $chunk for 1 .. $full;
  print substr($chunk, 0, ($rows - $full * 65536) * $dim * 4);' "$rows" "$dim" >>"$input"
[ "$(stat -c %s "$input")" -eq $((128 + rows * dim * 4)) ] || { echo "check_memory.sh: bad input size" >&2; exit 2; }
echo "input: $input, $rows x $dim f32 = $(((rows * dim * 4) >> 20)) MiB"
echo "bound: peak RSS < shard size ($shard) + 512 MiB = $((limit_kib / 1024)) MiB"

# measure NAME COMMAND...: runs COMMAND under GNU time -v, sampling its /proc/PID/status, and
# sets peak_kib (time -v's maximum RSS).
measure() {
  local name=$1
  shift
  /usr/bin/time -v -o "$scratch/time.txt" "$@" >"$scratch/$name.out" 2>&1 &
  local time_pid=$! peak_anon=0 peak_file=0 peak_rss=0 start now pid rss anon file status=0
  start=$(date +%s%N)
  echo "seconds VmRSS_MiB RssAnon_MiB RssFile_MiB" >"$scratch/trace.txt"
  while kill -0 "$time_pid" 2>/dev/null; do
    pid=$(pgrep -P "$time_pid" -x gpucache || true)
    if [ -n "$pid" ] && [ -r "/proc/$pid/status" ]; then
      read -r rss anon file < <(awk '/^VmRSS/ {r=$2} /^RssAnon/ {a=$2} /^RssFile/ {f=$2}
                                     END {print r+0, a+0, f+0}' "/proc/$pid/status" 2>/dev/null ||
        echo "0 0 0")
      [ "$rss" -gt "$peak_rss" ] && peak_rss=$rss
      [ "$anon" -gt "$peak_anon" ] && peak_anon=$anon
      [ "$file" -gt "$peak_file" ] && peak_file=$file
      now=$(date +%s%N)
      echo "$(((now - start) / 1000000000)) $((rss >> 10)) $((anon >> 10)) $((file >> 10))" \
        >>"$scratch/trace.txt"
    fi
    sleep 0.2
  done
  wait "$time_pid" || status=$?
  echo "== gpucache $name"
  cat "$scratch/$name.out"
  if [ "$status" -ne 0 ]; then
    echo "check_memory.sh: $name failed (exit $status)" >&2
    cat "$scratch/time.txt" >&2
    exit 2
  fi
  peak_kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$scratch/time.txt")
  echo "took $(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$scratch/time.txt");" \
    "peak RSS (time -v) $((peak_kib / 1024)) MiB; sampled peaks: VmRSS $((peak_rss / 1024)) MiB," \
    "RssAnon $((peak_anon / 1024)) MiB, RssFile $((peak_file / 1024)) MiB"
  # About 12 samples of the trace, evenly spaced, to show where the memory goes.
  local lines
  lines=$(wc -l <"$scratch/trace.txt")
  awk -v step=$(((lines + 11) / 12)) 'NR == 1 || (NR - 2) % step == 0 {
    printf "%8s %10s %12s %12s\n", $1, $2, $3, $4 }' "$scratch/trace.txt"
}

# shellcheck disable=SC2086
measure pack "$gpucache" pack "$input" -o "$scratch/out" --dtype f16 --shard-size "$shard" --quiet \
  ${GPUCACHE_MEMCHECK_ARGS:-}
pack_kib=$peak_kib
measure verify "$gpucache" verify "$scratch/out" --quiet
if [ "$pack_kib" -ge "$limit_kib" ]; then
  echo "FAIL: pack peak RSS $((pack_kib / 1024)) MiB >= bound $((limit_kib / 1024)) MiB"
  exit 1
fi
echo "ok: pack peak RSS $((pack_kib / 1024)) MiB < bound $((limit_kib / 1024)) MiB"
