// Compiled only when the CUDA toolkit is installed: proves that the types and constants declared
// by hand in cuda_api.hpp match the real CUDA runtime headers, so the dlopen'd calls are correct.
// It contributes no code to the library.
#include <cuda_runtime_api.h>

#include <type_traits>

#include "cuda_api.hpp"

namespace gpucache::runtime::detail {

static_assert(sizeof(cudaError_t) == sizeof(cuda_error_t));
static_assert(std::is_same_v<cudaStream_t, cuda_stream_t>);
static_assert(std::is_same_v<cudaEvent_t, cuda_event_t>);
static_assert(cudaSuccess == kCudaSuccess);
static_assert(cudaErrorNotReady == kCudaErrorNotReady);
static_assert(cudaErrorHostMemoryAlreadyRegistered == kCudaErrorHostMemoryAlreadyRegistered);
static_assert(cudaHostAllocPortable == kCudaHostAllocPortable);
static_assert(cudaHostAllocMapped == kCudaHostAllocMapped);
static_assert(cudaHostRegisterPortable == kCudaHostRegisterPortable);
static_assert(cudaHostRegisterReadOnly == kCudaHostRegisterReadOnly);
static_assert(cudaMemcpyHostToDevice == kCudaMemcpyHostToDevice);
static_assert(cudaStreamNonBlocking == kCudaStreamNonBlocking);
static_assert(cudaEventDisableTiming == kCudaEventDisableTiming);

// Each pointer type must accept the real function (modulo the enum-typed error and kind).
static_assert(std::is_convertible_v<decltype(&cudaMalloc), cudaError_t (*)(void**, size_t)>);
static_assert(
    std::is_convertible_v<decltype(&cudaHostRegister), cudaError_t (*)(void*, size_t, unsigned)>);
static_assert(std::is_convertible_v<decltype(&cudaMemcpyAsync),
                                    cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind,
                                                    cudaStream_t)>);
static_assert(std::is_convertible_v<decltype(&cudaHostGetDevicePointer),
                                    cudaError_t (*)(void**, void*, unsigned)>);
static_assert(std::is_convertible_v<decltype(&cudaMemGetInfo), cudaError_t (*)(size_t*, size_t*)>);
// Streams and events: the staging ring, host registrations and the coming batch stream.
static_assert(std::is_convertible_v<decltype(&cudaStreamCreateWithFlags),
                                    cudaError_t (*)(cudaStream_t*, unsigned)>);
static_assert(std::is_convertible_v<decltype(&cudaStreamDestroy), cudaError_t (*)(cudaStream_t)>);
static_assert(
    std::is_convertible_v<decltype(&cudaStreamSynchronize), cudaError_t (*)(cudaStream_t)>);
static_assert(std::is_convertible_v<decltype(&cudaStreamWaitEvent),
                                    cudaError_t (*)(cudaStream_t, cudaEvent_t, unsigned)>);
static_assert(std::is_convertible_v<decltype(&cudaEventCreateWithFlags),
                                    cudaError_t (*)(cudaEvent_t*, unsigned)>);
static_assert(
    std::is_convertible_v<decltype(&cudaEventRecord), cudaError_t (*)(cudaEvent_t, cudaStream_t)>);
static_assert(std::is_convertible_v<decltype(&cudaEventSynchronize), cudaError_t (*)(cudaEvent_t)>);
static_assert(std::is_convertible_v<decltype(&cudaEventQuery), cudaError_t (*)(cudaEvent_t)>);
static_assert(std::is_convertible_v<decltype(&cudaEventDestroy), cudaError_t (*)(cudaEvent_t)>);

}  // namespace gpucache::runtime::detail
