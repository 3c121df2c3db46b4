#include "destination_device.hpp"

#include "gpucache/error.hpp"

namespace gpucache::runtime::detail {
namespace {

std::shared_ptr<const CudaAllocation> allocate(const CudaApi& cuda, int device, std::uint64_t bytes,
                                               const std::string& dataset_path,
                                               const std::string& where) {
  std::size_t free_bytes = 0, total_bytes = 0;
  check_cuda(cuda, cuda.mem_get_info(&free_bytes, &total_bytes), where, "cudaMemGetInfo");
  if (bytes > free_bytes)
    throw Error(dataset_path, where,
                "needs " + gib(bytes) + " GiB, " + gib(free_bytes) + " GiB free on " + where +
                    "; select fewer columns or rows, or use placement host_pinned");
  if (bytes == 0) return nullptr;
  void* pointer = nullptr;
  check_cuda(cuda, cuda.malloc(&pointer, bytes), where, "cudaMalloc of " + gib(bytes) + " GiB");
  return std::make_shared<const CudaAllocation>(cuda, device, pointer, &CudaApi::free);
}

}  // namespace

DeviceDestination::DeviceDestination(const CudaApi& cuda, int device, std::uint64_t bytes,
                                     const std::string& dataset_path, const std::string& where)
    : cuda_(cuda),
      memory_(allocate(cuda, device, bytes, dataset_path, where)),
      stream_(cuda, where) {}

void DeviceDestination::write(std::uint64_t offset, const std::byte* from, std::uint64_t bytes,
                              const std::string& path) {
  check_cuda(cuda_,
             cuda_.memcpy_async(device_base() + offset, from, bytes, kCudaMemcpyHostToDevice,
                                stream_.get()),
             path, "cudaMemcpyAsync of " + std::to_string(bytes) + " bytes");
}

}  // namespace gpucache::runtime::detail
