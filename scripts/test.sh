#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test: the C++ suites through CTest (GPU-labelled
# tests skip on machines without a GPU).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GPUCACHE_BUILD_DIR:-$root/build}

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$@"
ctest --test-dir "$build_dir" --output-on-failure --parallel "$(nproc)"
