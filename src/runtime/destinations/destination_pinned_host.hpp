// Placement::host_pinned: one pinned, device-mapped host allocation (cudaHostAlloc, portable and
// mapped) that kernels read over PCIe, for datasets larger than VRAM. The CPU writes it: write()
// is a memcpy, done when it returns, so sources need neither pinned memory nor fences for it.
#pragma once

#include <memory>
#include <string>

#include "destinations.hpp"

namespace gpucache::runtime::detail {

class PinnedHostDestination final : public AllocationDestination {
 public:
  // Allocates `bytes` (nothing when 0) with `device` current.
  PinnedHostDestination(const CudaApi& cuda, int device, std::uint64_t bytes,
                        const std::string& where);

  cuda_stream_t stream() const noexcept override { return nullptr; }
  void write(std::uint64_t offset, const std::byte* from, std::uint64_t bytes,
             const std::string& path) override;
  void finish() override {}
  std::byte* device_base() const noexcept override { return device_base_; }
  std::shared_ptr<const void> memory() const noexcept override { return memory_; }

 private:
  std::shared_ptr<const CudaAllocation> memory_;
  std::byte* device_base_ = nullptr;  // the same memory as kernels address it
};

}  // namespace gpucache::runtime::detail
