#!/usr/bin/env bash
# Time for a rank to open its slice (one row) of datasets of 10, 10,000 and 100,000 one-row
# shards, warm page cache: Dataset::open + select_rows(0, 1) + to_host, the work under
# gpucache.load(path, rows=(0, 1), device="cpu"). Writes the datasets under $GPUCACHE_BENCH_DIR
# (default /tmp/gpucache-open-slice; about 0.9 GB for 100,000 shards, kept for reruns).
# Not run in CI. Results: docs/benchmarks.md, "Opening a slice of many shards".
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=${GPUCACHE_BUILD_DIR:-$root/build}
cmake --build "$build_dir" --target gpucache_bench_open_slice >/dev/null
work=${GPUCACHE_BENCH_DIR:-/tmp/gpucache-open-slice}
mkdir -p "$work"
for shards in ${GPUCACHE_BENCH_SHARDS:-10 10000 100000}; do
  "$build_dir/scripts/bench/native/gpucache_bench_open_slice" "$work/shards-$shards" "$shards"
done
