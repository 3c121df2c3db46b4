// The CUDA kernels of the validate module as one table of functions. The kernels and their host
// launchers are built into a shared module of their own, libgpucache_cuda_kernels.so, that links
// the shared CUDA runtime (libcudart.so.N) and exports one symbol, gpucache_cuda_kernels_v1. The
// validate module (and so the CLI, the Python extension and the tests) links no CUDA at all: it
// loads the CUDA runtime through common's cuda_runtime_library(), the same library the runtime
// reader uses, then this module with dlopen, whose need of libcudart.so.N the dynamic loader meets
// with that already-loaded library. One CUDA runtime per process, and every binary starts on a
// machine without CUDA. No CUDA types here: plain C++ translation units include this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/row_checks.cuh"

namespace gpucache::detail {

struct CudaStaging;

// Bumped whenever the table or a signature in it changes: a module of another version is refused.
inline constexpr unsigned kCudaKernelsVersion = 2;  // 2: InputType::f64_kept

struct CudaKernels {
  unsigned version;  // kCudaKernelsVersion of the module
  std::size_t size;  // sizeof(CudaKernels) of the module
  // kernels/cuda_device.cuh
  int (*device_count)() noexcept;
  std::string (*device_description)(int device);
  // kernels/cuda_staging.cuh
  CudaStaging* (*staging_create)(unsigned host_threads);
  void (*staging_destroy)(CudaStaging* staging) noexcept;
  int (*staging_device)(const CudaStaging& staging) noexcept;
  std::uint64_t (*staging_uploaded_bytes)(const CudaStaging& staging) noexcept;
  // kernels/validate.cuh
  void (*summarize_rows)(CudaStaging& staging, const SummaryParams& params, const std::byte* rows,
                         const std::byte* device_rows, std::uint64_t count, ColumnSummary* out);
  void (*dot_rows)(CudaStaging& staging, const DotParams& params, const std::byte* a,
                   const std::byte* device_a, const std::byte* b, const std::byte* device_b,
                   std::uint64_t count, double* out);
  // kernels/convert.cuh
  ConvertCounts (*convert_rows)(CudaStaging& staging, const ConvertParams& params, const float* in,
                                std::uint64_t rows, std::byte* out);
  // kernels/row_order.cuh
  bool (*sort_by_key)(std::uint64_t* keys, std::uint64_t* values, std::uint64_t count);
  bool (*order_selected_rows)(const std::uint8_t* selected, std::uint64_t count, bool by_key,
                              std::uint64_t seed, std::uint64_t purpose, std::uint64_t* out,
                              std::uint64_t* written);
  // The address of cudaGetDeviceCount as the module's calls reach it: the loader checks it is the
  // function of the process's one CUDA runtime.
  const void* (*runtime_function)() noexcept;
};

// The loaded table, or nullptr (with the reason in `why`) when the CUDA runtime or the module
// could not be loaded, or the module is bound to another CUDA runtime than the process's. Loaded
// once. The module is looked for at $GPUCACHE_CUDA_KERNELS, beside the binary that holds this code
// (the Python extension), where `cmake --install` and `pip install` put it relative to that
// binary, then in the build tree.
const CudaKernels* cuda_kernels(std::string* why = nullptr) noexcept;
// The file the table was loaded from ("" when none).
std::string cuda_kernels_path();

}  // namespace gpucache::detail

// The module's one exported symbol.
extern "C" const gpucache::detail::CudaKernels* gpucache_cuda_kernels_v1();
