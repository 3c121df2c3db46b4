// The one CUDA runtime library (libcudart) of the process, loaded with dlopen on first use. Both
// users of CUDA reach it through here: the runtime reader's CudaApi (src/runtime/cuda_api.cpp),
// which resolves its functions in it, and the validate module's kernels, a separate shared module
// (src/validate/kernels/cuda_kernels.cpp) whose own need of libcudart.so.N the dynamic loader then
// meets with this same library, matched by its soname. So a process holds one CUDA runtime, the
// one PyTorch loaded when it was first, and no binary of gpucache needs CUDA to start.
#pragma once

#include <string>

namespace gpucache {

struct CudaRuntimeLibrary {
  void* handle = nullptr;  // from dlopen; never closed
  std::string name;        // what was opened: $GPUCACHE_CUDART's path or a soname
};

// Tries, in order: the path in $GPUCACHE_CUDART, a libcudart already loaded into the process
// (PyTorch's), then libcudart.so.13, .so.12 and .so. Decided once per process (per copy of this
// module). Returns nullptr, with the reason in `why`, when none could be loaded.
const CudaRuntimeLibrary* cuda_runtime_library(std::string* why = nullptr) noexcept;

}  // namespace gpucache
