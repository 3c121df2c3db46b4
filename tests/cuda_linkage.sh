#!/usr/bin/env bash
# One CUDA runtime per process: checks built binaries for a CUDA runtime of their own.
#   tests/cuda_linkage.sh KERNELS_MODULE BINARY...
# BINARY (the CLI, a test, the Python extension) must neither need libcudart nor hold a static
# copy of it (cudart_static defines cudaGetDeviceCount, __cudaRegisterFatBinary and the cudart::
# internals); KERNELS_MODULE (libgpucache_cuda_kernels.so) must need the shared libcudart.so.N
# and hold no copy either. Exit 0 when all hold, 1 with one line per finding, 77 (skipped) when
# readelf or nm is missing. Run as the CTest cuda_linkage and by scripts/gpu-check.sh on the
# installed Python extension.
set -uo pipefail
for tool in readelf nm; do
  command -v "$tool" >/dev/null || { echo "cuda_linkage: $tool not found: skipped"; exit 77; }
done
[ $# -ge 2 ] || { echo "usage: $0 KERNELS_MODULE BINARY..." >&2; exit 2; }
module=$1
shift
status=0
# Symbols only a CUDA runtime defines; nvcc's generated code only calls them.
runtime_symbols='^(cudaGetDeviceCount|cudaMalloc|cudaLaunchKernel|__cudaRegisterFatBinary|__cudaPushCallConfiguration|_ZN6cudart.*)$'
defined_runtime_symbols() {
  { nm --defined-only "$1" 2>/dev/null; nm -D --defined-only "$1" 2>/dev/null; } |
    awk '{print $NF}' | grep -E "$runtime_symbols" | sort -u | head -3 | tr '\n' ' '
}
needed_cudart() {
  readelf -dW "$1" | sed -n 's/.*(NEEDED).*\[\(libcudart[^]]*\)\].*/\1/p' | head -1
}
check_binary() {
  local file=$1 kind=$2 held needed
  if [ ! -f "$file" ]; then
    echo "cuda_linkage: $file does not exist"
    status=1
    return
  fi
  held=$(defined_runtime_symbols "$file")
  if [ -n "$held" ]; then
    echo "cuda_linkage: $file holds a static CUDA runtime (defines $held)"
    status=1
  fi
  needed=$(needed_cudart "$file")
  if [ "$kind" = module ] && [ -z "$needed" ]; then
    echo "cuda_linkage: $file does not need the shared libcudart"
    status=1
  elif [ "$kind" = binary ] && [ -n "$needed" ]; then
    echo "cuda_linkage: $file needs $needed: it would not start where CUDA is not installed"
    status=1
  fi
}
check_binary "$module" module
for binary in "$@"; do check_binary "$binary" binary; done
[ "$status" = 0 ] && echo "cuda_linkage: one CUDA runtime: $(needed_cudart "$module") through $(basename "$module"); $# binaries hold none"
exit "$status"
