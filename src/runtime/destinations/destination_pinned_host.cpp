#include "destination_pinned_host.hpp"

#include <cstring>

namespace gpucache::runtime::detail {

PinnedHostDestination::PinnedHostDestination(const CudaApi& cuda, int device, std::uint64_t bytes,
                                             const std::string& where) {
  if (bytes == 0) return;
  void* pointer = nullptr;
  check_cuda(cuda, cuda.host_alloc(&pointer, bytes, kCudaHostAllocPortable | kCudaHostAllocMapped),
             where, "cudaHostAlloc of " + gib(bytes) + " GiB of pinned host memory");
  memory_ = std::make_shared<const CudaAllocation>(cuda, device, pointer, &CudaApi::free_host);
  void* device_pointer = nullptr;
  check_cuda(cuda, cuda.host_get_device_pointer(&device_pointer, pointer, 0), where,
             "cudaHostGetDevicePointer");
  device_base_ = static_cast<std::byte*>(device_pointer);
}

void PinnedHostDestination::write(std::uint64_t offset, const std::byte* from, std::uint64_t bytes,
                                  const std::string&) {
  if (bytes == 0) return;
  std::memcpy(memory_->data() + offset, from, bytes);
}

}  // namespace gpucache::runtime::detail
