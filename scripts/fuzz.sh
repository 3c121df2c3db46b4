#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan, UBSan) into build-fuzz/ and runs each for a while.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]   run every target (or the ones named) SECONDS each
#   scripts/fuzz.sh --smoke [TARGET...]      only run the committed corpora once (a few seconds)
#   scripts/fuzz.sh --make-corpus            rewrite the seed corpora in fuzz/corpus/
#   scripts/fuzz.sh --list                   print the target names
#
# SECONDS defaults to $GPUCACHE_FUZZ_SECONDS or 60. Other settings: GPUCACHE_FUZZ_BUILD_DIR
# (default build-fuzz), GPUCACHE_FUZZ_JOBS (parallel fuzzing processes per target, default 1),
# GPUCACHE_FUZZ_RUNS (also stop a target after this many executions, e.g. 10000000).
# What the fuzzer finds beyond the seeds goes to $build/corpus/<target> (kept between runs, not
# committed); crashing inputs go to $build/artifacts/<target>/. Each run's executions are appended
# to $build/fuzz-log.tsv. Exits 1 if any target found a crash, leak, timeout or OOM.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUCACHE_FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${GPUCACHE_FUZZ_JOBS:-1}

all_targets() { sed -n 's/^set(gpucache_fuzz_targets \(.*\))$/\1/p' "$root/fuzz/CMakeLists.txt"; }

# Longest input each target may grow to: shards need room for a few 4 KiB pages, Parquet files
# for a footer after the pages of several columns (the fixtures are 1-34 KB).
max_len() {
  case "$1" in
    shard_layout) echo 65536 ;;
    pt | zip | npz | parquet) echo 65536 ;;
    *) echo 16384 ;;
  esac
}

mode=run
seconds=${GPUCACHE_FUZZ_SECONDS:-60}
case "${1:-}" in
  --smoke) mode=smoke; shift ;;
  --make-corpus) mode=corpus; shift ;;
  --list) all_targets | tr ' ' '\n'; exit 0 ;;
  -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
  '' ) ;;
  *[!0-9]*) ;;  # a target name
  *) seconds=$1; shift ;;
esac
targets=("$@")
[ ${#targets[@]} -eq 0 ] && read -r -a targets <<<"$(all_targets)"

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is needed (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DGPUCACHE_FUZZ=ON -DGPUCACHE_CUDA=OFF -DGPUCACHE_BUILD_TESTS=OFF >/dev/null
build_targets=(fuzz_make_corpus)
for target in "${targets[@]}"; do build_targets+=("fuzz_$target"); done
mkdir -p "$build"
# Several fuzz.sh runs may share one build directory; ninja must not run twice in it at once.
flock "$build/.build-lock" cmake --build "$build" --parallel "$(nproc)" --target "${build_targets[@]}"

if [ "$mode" = corpus ]; then
  "$build/fuzz/fuzz_make_corpus" "$root"
  du -sh "$root"/fuzz/corpus/*
  exit 0
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
log="$build/fuzz-log.tsv"
[ -f "$log" ] || printf 'date\ttarget\tseconds\texecutions\tresult\n' >"$log"
for target in "${targets[@]}"; do
  seeds="$root/fuzz/corpus/$target"
  regressions="$root/fuzz/regressions/$target"
  work="$build/corpus/$target"
  artifacts="$build/artifacts/$target/"
  mkdir -p "$work" "$artifacts"
  args=(-max_len="$(max_len "$target")" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024
        -artifact_prefix="$artifacts" -print_final_stats=1)
  [ -f "$root/fuzz/dicts/$target.dict" ] && args+=(-dict="$root/fuzz/dicts/$target.dict")
  [ -n "${GPUCACHE_FUZZ_RUNS:-}" ] && args+=(-runs="$GPUCACHE_FUZZ_RUNS")
  inputs=("$seeds")
  [ -d "$regressions" ] && inputs+=("$regressions")
  output="$build/$target.log"
  if [ "$mode" = smoke ]; then
    echo "== fuzz smoke: $target (corpus only)"
    result=ok
    "$build/fuzz/fuzz_$target" "${args[@]}" -runs=0 "${inputs[@]}" >"$output" 2>&1 || result=FAILED
  else
    echo "== fuzz: $target for ${seconds}s ($jobs job(s))"
    result=ok
    if [ "$jobs" -gt 1 ]; then
      args+=(-fork="$jobs" -ignore_crashes=0)
    fi
    "$build/fuzz/fuzz_$target" "${args[@]}" -max_total_time="$seconds" "$work" "${inputs[@]}" \
      >"$output" 2>&1 || result=FAILED
  fi
  executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$output" | awk '{s+=$2} END {print s+0}')
  if [ "$executions" = 0 ]; then  # -fork mode prints no final stats; take the last status line
    executions=$(grep -o '^#[0-9]*' "$output" | tail -1 | tr -d '#')
    executions=${executions:-0}
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$target" \
    "$([ "$mode" = smoke ] && echo 0 || echo "$seconds")" "$executions" "$result" >>"$log"
  echo "   $result: $executions executions (log: $output)"
  if [ "$result" != ok ]; then
    status=1
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$output" | head -20 >&2 || true
  fi
done
exit $status
