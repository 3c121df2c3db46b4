#include <memory>
#include <string>

#include "gpucache/error.hpp"
#include "kernels/cuda_chunks.cuh"

namespace gpucache::detail {

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  throw Error("", "CUDA",
              std::string(what) + ": " + cudaGetErrorName(status) + " (" +
                  cudaGetErrorString(status) + ")");
}

namespace {

void free_buffers(CudaStaging& staging) noexcept {
  // cudaFreeHost and cudaFree wait for the whole device first.
  CudaCallWatch watch("cudaFreeHost/cudaFree of the validation staging buffers");
  for (int slot = 0; slot < kSlots; ++slot) {
    if (staging.host_in[slot]) cudaFreeHost(staging.host_in[slot]);
    if (staging.host_out[slot]) cudaFreeHost(staging.host_out[slot]);
    if (staging.device_in[slot]) cudaFree(staging.device_in[slot]);
    if (staging.device_out[slot]) cudaFree(staging.device_out[slot]);
    staging.host_in[slot] = staging.host_out[slot] = nullptr;
    staging.device_in[slot] = staging.device_out[slot] = nullptr;
  }
  staging.in_capacity = staging.out_capacity = 0;
}

}  // namespace

void cuda_staging_destroy(CudaStaging* staging) noexcept {
  if (!staging) return;
  staging->abandon();
  free_buffers(*staging);
  CudaCallWatch watch("cudaFree/cudaEventDestroy/cudaStreamDestroy of the validation staging");
  if (staging->device_counters) cudaFree(staging->device_counters);
  for (int slot = 0; slot < kSlots; ++slot) {
    if (staging->done[slot]) cudaEventDestroy(staging->done[slot]);
    if (staging->streams[slot]) cudaStreamDestroy(staging->streams[slot]);
  }
  delete staging;
}

CudaStaging* cuda_staging_create(unsigned host_threads) {
  std::unique_ptr<CudaStaging, void (*)(CudaStaging*) noexcept> staging(new CudaStaging,
                                                                        cuda_staging_destroy);
  staging->host_threads = resolve_thread_count(host_threads);
  int& device = staging->device;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&staging->sm_count, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute");
  for (int slot = 0; slot < kSlots; ++slot) {
    // The first stream creates the device's context: the driver's longest step.
    check_cuda(watched_call("cudaStreamCreateWithFlags (validation staging; creates the context)",
                            [&] {
                              return cudaStreamCreateWithFlags(&staging->streams[slot],
                                                               cudaStreamNonBlocking);
                            }),
               "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&staging->done[slot], cudaEventDisableTiming),
               "cudaEventCreate");
  }
  check_cuda(watched_call("cudaMalloc (validation counters)",
                          [&] {
                            return cudaMalloc(reinterpret_cast<void**>(&staging->device_counters),
                                              4 * sizeof(unsigned long long));
                          }),
             "cudaMalloc (counters)");
  cuda_debug("validation staging on cuda:%d, %d SMs, %u host threads", device, staging->sm_count,
             staging->host_threads);
  return staging.release();
}

int cuda_staging_device(const CudaStaging& staging) noexcept {
  return staging.device;
}

std::uint64_t cuda_staging_uploaded_bytes(const CudaStaging& staging) noexcept {
  return staging.uploaded_bytes;
}

void CudaStaging::reserve(std::size_t in_bytes, std::size_t out_bytes) {
  if (in_bytes <= in_capacity && out_bytes <= out_capacity) return;
  for (int slot = 0; slot < kSlots; ++slot) drain(slot);
  const std::size_t in_size = std::max(in_bytes, in_capacity);
  const std::size_t out_size = std::max(out_bytes, out_capacity);
  free_buffers(*this);
  CudaCallWatch watch("cudaHostAlloc/cudaMalloc of 2 x (%zu + %zu) bytes of validation staging",
                      in_size, out_size);
  for (int slot = 0; slot < kSlots; ++slot) {
    check_cuda(
        cudaHostAlloc(reinterpret_cast<void**>(&host_in[slot]), in_size, cudaHostAllocDefault),
        "cudaHostAlloc (input staging)");
    check_cuda(
        cudaHostAlloc(reinterpret_cast<void**>(&host_out[slot]), out_size, cudaHostAllocDefault),
        "cudaHostAlloc (output staging)");
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&device_in[slot]), in_size),
               "cudaMalloc (input chunk)");
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&device_out[slot]), out_size),
               "cudaMalloc (output chunk)");
  }
  in_capacity = in_size;
  out_capacity = out_size;
}

void CudaStaging::drain(int slot) {
  Pending& chunk = pending[slot];
  if (!chunk.destination) return;
  check_cuda(watched_call("cudaEventSynchronize (a validation chunk's kernels and copies)",
                          [&] { return cudaEventSynchronize(done[slot]); }),
             "waiting for a chunk");
  parallel_copy(chunk.destination, host_out[slot], chunk.bytes, host_threads);
  chunk = {};
}

void CudaStaging::abandon() noexcept {
  CudaCallWatch watch("cudaStreamSynchronize of both validation streams (after an error)");
  for (int slot = 0; slot < kSlots; ++slot) {
    if (streams[slot]) cudaStreamSynchronize(streams[slot]);
    pending[slot] = {};
  }
  cudaGetLastError();
}

}  // namespace gpucache::detail
