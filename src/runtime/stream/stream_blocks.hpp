// The memory of the batch stream: a block holds one batch (its host staging bytes, pinned for a
// GPU stream, and its device copy), and a pool reuses blocks once their batch is let go, so the
// stream's memory stays at the blocks in flight plus those the consumer holds.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "cuda_stream.hpp"
#include "gpucache/batch_stream.hpp"

namespace gpucache::runtime::detail {

struct BatchBlock {
  BatchBlock(const CudaApi* cuda, int device) : cuda(cuda), device(device) {}
  // Waits for the copies out of and the consumer's work on the block, then frees its memory.
  ~BatchBlock();
  BatchBlock(const BatchBlock&) = delete;
  BatchBlock& operator=(const BatchBlock&) = delete;

  // At least `bytes` of host (pinned with CUDA) and, for a GPU stream, device memory. Waits for
  // the last copy out of the host memory and the consumer's last use of the device memory.
  void reserve(std::size_t bytes);
  // Before a new batch is gathered into the block: the last copy out of it has completed.
  void wait_for_copy() const;

  const CudaApi* cuda;
  int device;
  std::byte* host = nullptr;
  void* device_memory = nullptr;
  std::size_t capacity = 0;
  std::optional<CudaEvent> copied;    // after the copy to the device
  std::optional<CudaEvent> released;  // on the consumer's stream, when the batch was let go
  bool consumer_waited = false;       // Batch::wait was called: record `released` when let go
  cuda_stream_t consumer = nullptr;

  std::uint64_t epoch = 0, index = 0;
  std::vector<std::uint64_t> rows;
  std::vector<BatchColumn> columns;
  std::uint64_t bytes = 0;  // of this batch
};

// Hands out blocks, as shared_ptrs that come back to the pool when their last holder goes (the
// pool may be gone by then: the block is then freed).
class BlockPool : public std::enable_shared_from_this<BlockPool> {
 public:
  BlockPool(const CudaApi* cuda, int device, std::size_t keep)
      : cuda_(cuda), device_(device), keep_(keep) {}
  std::shared_ptr<BatchBlock> acquire();
  // The most blocks that existed at once: the stream's memory bound in blocks.
  std::uint64_t peak() const;

 private:
  void give_back(BatchBlock* block) noexcept;
  const CudaApi* cuda_;
  int device_;
  std::size_t keep_;  // free blocks kept for reuse; more are freed
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<BatchBlock>> free_;
  std::uint64_t allocated_ = 0, peak_ = 0;
};

}  // namespace gpucache::runtime::detail
