#!/usr/bin/env bash
# Configures and builds gpucache into build/ (or $GPUCACHE_BUILD_DIR). Extra arguments go to cmake,
# e.g. scripts/build.sh -DGPUCACHE_CUDA=OFF. CUDA architectures, unless GPUCACHE_CUDA_ARCHITECTURES
# says otherwise: the GPUs of this machine when it has any ("native"); in CI sm_90 code, so ptxas
# runs; otherwise PTX for sm_80, which any Ampere-or-newer GPU compiles at load time. (Plain cmake
# without this script builds real code for sm_80/86/89/90/120 plus PTX.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GPUCACHE_BUILD_DIR:-$root/build}

cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=${GPUCACHE_BUILD_TYPE:-Release})
if [ -n "${GPUCACHE_CUDA_ARCHITECTURES:-}" ]; then
  cmake_args+=("-DCMAKE_CUDA_ARCHITECTURES=$GPUCACHE_CUDA_ARCHITECTURES")
elif [ "${CI:-}" = "true" ]; then
  cmake_args+=("-DCMAKE_CUDA_ARCHITECTURES=90-real")
elif nvidia-smi -L >/dev/null 2>&1; then
  cmake_args+=("-DCMAKE_CUDA_ARCHITECTURES=native")
else
  cmake_args+=("-DCMAKE_CUDA_ARCHITECTURES=80-virtual")
fi

cmake -S "$root" -B "$build_dir" "${cmake_args[@]}" "$@" >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)"
