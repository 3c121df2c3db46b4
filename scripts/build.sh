#!/usr/bin/env bash
# Configures and builds gpucache into build/ (or $GPUCACHE_BUILD_DIR). Extra arguments go to cmake,
# e.g. scripts/build.sh -DGPUCACHE_CUDA=OFF. In CI the CUDA code is compiled for one architecture
# (sm_90) to save time; otherwise for every default architecture.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GPUCACHE_BUILD_DIR:-$root/build}

cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=${GPUCACHE_BUILD_TYPE:-Release})
if [ -n "${GPUCACHE_CUDA_ARCHITECTURES:-}" ]; then
  cmake_args+=("-DCMAKE_CUDA_ARCHITECTURES=$GPUCACHE_CUDA_ARCHITECTURES")
elif [ "${CI:-}" = "true" ]; then
  cmake_args+=("-DCMAKE_CUDA_ARCHITECTURES=90-real")
fi

cmake -S "$root" -B "$build_dir" "${cmake_args[@]}" "$@" >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)"
