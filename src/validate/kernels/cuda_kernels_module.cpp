// The entry point of libgpucache_cuda_kernels.so (cuda_kernels.hpp): the table of the kernels'
// host functions. The module's only exported symbol; everything else in it is hidden.
#include <cuda_runtime_api.h>

#include "kernels/convert.cuh"
#include "kernels/cuda_device.cuh"
#include "kernels/cuda_kernels.hpp"
#include "kernels/cuda_staging.cuh"
#include "kernels/row_order.cuh"
#include "kernels/validate.cuh"

namespace gpucache::detail {
namespace {

// The address this module's calls of cudaGetDeviceCount go to: the dynamic loader resolved it in
// the libcudart.so.N the module needs, which is the process's one if that was loaded first.
const void* runtime_function() noexcept {
  return reinterpret_cast<const void*>(&cudaGetDeviceCount);
}

constexpr CudaKernels kTable{kCudaKernelsVersion,      sizeof(CudaKernels),
                             cuda_device_count,        cuda_device_description,
                             cuda_staging_create,      cuda_staging_destroy,
                             cuda_staging_device,      cuda_staging_uploaded_bytes,
                             cuda_summarize_rows,      cuda_dot_rows,
                             cuda_convert_rows,        cuda_sort_by_key,
                             cuda_order_selected_rows, runtime_function};

}  // namespace
}  // namespace gpucache::detail

extern "C" __attribute__((visibility("default"))) const gpucache::detail::CudaKernels*
gpucache_cuda_kernels_v1() {
  return &gpucache::detail::kTable;
}
