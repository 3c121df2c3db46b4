#!/usr/bin/env bash
# The benchmark suite in one command: builds the CLI if needed, prepares the bench venv, then runs
# scripts/bench/driver.py, which generates the data, measures, and writes bench-out/results.{json,md}
# and bench-out/chart.png (docs/benchmarks.md with --publish). See docs/benchmarks.md.
#   scripts/bench.sh [--quick] [--publish] [--size 1G] [--reps 5] [--only tools,loads] ...
#   scripts/bench.sh --help
#   scripts/bench.sh --offline --only gpu ...   # installs and builds nothing (scripts/gpu-check.sh)
# --offline (or GPUCACHE_BENCH_OFFLINE=1): no venv is made and nothing is installed or built; the
# driver runs on $GPUCACHE_BENCH_PYTHON (default python3) as it is, which must import gpucache, with
# the CLI and helpers already built in the build directory. Cases whose packages are missing there
# are reported as not available.
# Environment: GPUCACHE_BUILD_DIR (default build/), GPUCACHE_BENCH_VENV (default .venv-bench),
# GPUCACHE_BENCH_PYTHON (default /usr/bin/python3), GPUCACHE_BENCH_CMAKE_ARGS (extra cmake
# arguments when build/ is configured here), GPUCACHE_BENCH_<OPTION> for any driver option.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GPUCACHE_BUILD_DIR:-$root/build}
export GPUCACHE_BUILD_DIR=$build_dir

help=0
offline=0
[ "${GPUCACHE_BENCH_OFFLINE:-0}" != 0 ] && offline=1
driver_args=()
for arg in "$@"; do
  case "$arg" in
    --help | -h) help=1 ;;
    --offline) offline=1 && continue ;;
  esac
  driver_args+=("$arg")
done

if [ "$offline" = 1 ]; then
  python=${GPUCACHE_BENCH_PYTHON:-python3}
  for tool in "$build_dir/src/cli/gpucache"; do
    [ -x "$tool" ] || { echo "bench: --offline: $tool is not built" >&2; exit 2; }
  done
  "$python" -c "import gpucache" ||
    { echo "bench: --offline: $python cannot import gpucache (pip install . first)" >&2; exit 2; }
  exec "$python" "$root/scripts/bench/driver.py" --root "$root" --build-dir "$build_dir" \
    ${driver_args[@]+"${driver_args[@]}"}
fi

if [ "$help" = 0 ]; then
  if [ ! -f "$build_dir/build.ninja" ] && [ ! -f "$build_dir/Makefile" ]; then
    echo "bench: configuring $build_dir (Release)" >&2
    # shellcheck disable=SC2086
    cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      ${GPUCACHE_BENCH_CMAKE_ARGS:-} >/dev/null
  fi
  echo "bench: building gpucache_cli" >&2
  cmake --build "$build_dir" --target gpucache_cli --parallel "$(nproc)" >&2
  # The validation microbenchmark exists once the validation engine is in the tree.
  for tool in gpucache_bench_validate gpucache_bench_open_slice; do
    if cmake --build "$build_dir" --target help 2>/dev/null | grep "$tool" >/dev/null; then
      echo "bench: building $tool" >&2
      cmake --build "$build_dir" --target "$tool" --parallel "$(nproc)" >&2
    fi
  done
fi

venv=$("$root/scripts/bench/setup-venv.sh")
exec "$venv/bin/python" "$root/scripts/bench/driver.py" --root "$root" --build-dir "$build_dir" \
  ${driver_args[@]+"${driver_args[@]}"}
