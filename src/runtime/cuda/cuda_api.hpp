// The few CUDA runtime functions the reader calls, resolved with dlopen/dlsym on first use so the
// library links no CUDA and runs on machines without a GPU. The types and constants are declared
// here by hand (cuda_abi_check.cpp compares them with the toolkit's headers when it is installed).
#pragma once

#include <cstddef>
#include <string>

namespace gpucache::runtime::detail {

using cuda_error_t = int;
using cuda_stream_t = struct CUstream_st*;
using cuda_event_t = struct CUevent_st*;

inline constexpr cuda_error_t kCudaSuccess = 0;
inline constexpr cuda_error_t kCudaErrorNotReady = 600;  // cudaEventQuery: not yet completed
inline constexpr cuda_error_t kCudaErrorHostMemoryAlreadyRegistered = 712;
inline constexpr unsigned kCudaHostAllocPortable = 0x01;
inline constexpr unsigned kCudaHostAllocMapped = 0x02;
inline constexpr unsigned kCudaHostRegisterPortable = 0x01;
inline constexpr unsigned kCudaHostRegisterReadOnly = 0x08;
inline constexpr int kCudaMemcpyHostToDevice = 1;
inline constexpr unsigned kCudaStreamNonBlocking = 0x01;
inline constexpr unsigned kCudaEventDisableTiming = 0x02;

struct CudaApi {
  cuda_error_t (*get_device_count)(int*);
  cuda_error_t (*set_device)(int);
  cuda_error_t (*get_device)(int*);
  cuda_error_t (*mem_get_info)(std::size_t*, std::size_t*);
  cuda_error_t (*malloc)(void**, std::size_t);
  cuda_error_t (*free)(void*);
  cuda_error_t (*host_alloc)(void**, std::size_t, unsigned);
  cuda_error_t (*free_host)(void*);
  cuda_error_t (*host_register)(void*, std::size_t, unsigned);
  cuda_error_t (*host_unregister)(void*);
  cuda_error_t (*host_get_device_pointer)(void**, void*, unsigned);
  cuda_error_t (*memcpy_async)(void*, const void*, std::size_t, int, cuda_stream_t);
  cuda_error_t (*stream_create_with_flags)(cuda_stream_t*, unsigned);
  cuda_error_t (*stream_destroy)(cuda_stream_t);
  cuda_error_t (*stream_synchronize)(cuda_stream_t);
  cuda_error_t (*stream_wait_event)(cuda_stream_t, cuda_event_t, unsigned);
  cuda_error_t (*event_create_with_flags)(cuda_event_t*, unsigned);
  cuda_error_t (*event_record)(cuda_event_t, cuda_stream_t);
  cuda_error_t (*event_synchronize)(cuda_event_t);
  cuda_error_t (*event_query)(cuda_event_t);
  cuda_error_t (*event_destroy)(cuda_event_t);
  cuda_error_t (*get_last_error)();
  const char* (*get_error_string)(cuda_error_t);

  std::string library;  // the file that was loaded
  // The same functions as the library defines them. The entries above run them inside a
  // CudaCallWatch (common/cuda_watch.hpp), so a call that blocks is reported and traced.
  const CudaApi* resolved = nullptr;
};

// The loaded API, or nullptr when no usable libcudart was found. Tries, in order: the path in
// $GPUCACHE_CUDART, a libcudart already loaded into the process (PyTorch's, so both share one
// runtime), then libcudart.so.13, .so.12 and .so. `why` receives the reason it failed.
const CudaApi* load_cuda_api(std::string* why = nullptr) noexcept;
// Like load_cuda_api but throws gpucache::Error when CUDA is unusable; `what` names the caller.
const CudaApi& require_cuda_api(const std::string& what);
// Throws gpucache::Error("", location, call + " failed: <CUDA's message>") unless status is
// success.
void check_cuda(const CudaApi& api, cuda_error_t status, const std::string& location,
                const std::string& call);
std::string cuda_error_text(const CudaApi& api, cuda_error_t status);

}  // namespace gpucache::runtime::detail
