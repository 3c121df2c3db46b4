// Placement::device: one cudaMalloc holding every selected tensor and sequence column (laid out
// by plan_device_layout); writes are cudaMemcpyAsync host-to-device on the destination's own
// non-blocking stream, so they run while sources read and hash the next bytes.
#pragma once

#include <memory>
#include <string>

#include "cuda_stream.hpp"
#include "destinations.hpp"

namespace gpucache::runtime::detail {

class DeviceDestination final : public AllocationDestination {
 public:
  // With `device` current: checks that `bytes` fit in its free memory (else "<dataset_path>:
  // <where>: needs X GiB, Y GiB free on <where>; ...") and allocates them (nothing when 0).
  DeviceDestination(const CudaApi& cuda, int device, std::uint64_t bytes,
                    const std::string& dataset_path, const std::string& where);

  cuda_stream_t stream() const noexcept override { return stream_.get(); }
  void write(std::uint64_t offset, const std::byte* from, std::uint64_t bytes,
             const std::string& path) override;
  void finish() override { stream_.synchronize(); }
  std::byte* device_base() const noexcept override { return memory_ ? memory_->data() : nullptr; }
  std::shared_ptr<const void> memory() const noexcept override { return memory_; }

 private:
  const CudaApi& cuda_;
  std::shared_ptr<const CudaAllocation> memory_;
  CudaStream stream_;  // after memory_: goes first, once the copies into the memory completed
};

}  // namespace gpucache::runtime::detail
