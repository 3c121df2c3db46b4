#include "stream_blocks.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "destinations.hpp"

namespace gpucache::runtime::detail {
namespace {

constexpr std::size_t kHostAlignment = 4096;

void free_memory(BatchBlock& block) noexcept {
  if (block.cuda) {
    // Copies out of the host memory and the consumer's kernels on the device memory first.
    if (block.copied) block.cuda->event_synchronize(block.copied->get());
    if (block.released) block.cuda->event_synchronize(block.released->get());
    if (block.host) block.cuda->free_host(block.host);
    if (block.device_memory) block.cuda->free(block.device_memory);
  } else {
    std::free(block.host);
  }
  block.host = nullptr;
  block.device_memory = nullptr;
  block.capacity = 0;
}

}  // namespace

BatchBlock::~BatchBlock() {
  if (cuda) {
    int previous = -1;
    cuda->get_device(&previous);
    cuda->set_device(device);
    free_memory(*this);
    if (previous >= 0) cuda->set_device(previous);
  } else {
    free_memory(*this);
  }
}

void BatchBlock::wait_for_copy() const {
  if (copied) copied->synchronize();
}

void BatchBlock::reserve(std::size_t wanted) {
  if (wanted <= capacity) return;
  const std::size_t size = (wanted + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  free_memory(*this);
  const std::string where = device >= 0 ? "cuda:" + std::to_string(device) : "stream";
  if (cuda) {
    void* pointer = nullptr;
    check_cuda(*cuda, cuda->host_alloc(&pointer, size, 0), "staging",
               "cudaHostAlloc of " + gib(size) + " GiB of pinned batch staging");
    host = static_cast<std::byte*>(pointer);
    check_cuda(*cuda, cuda->malloc(&device_memory, size), where,
               "cudaMalloc of " + gib(size) + " GiB for a batch");
    if (!copied) copied.emplace(*cuda, where);
    if (!released) released.emplace(*cuda, where);
  } else {
    host = static_cast<std::byte*>(std::aligned_alloc(kHostAlignment, size));
    if (!host) throw std::bad_alloc();
  }
  capacity = size;
}

std::shared_ptr<BatchBlock> BlockPool::acquire() {
  std::unique_ptr<BatchBlock> block;
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      block = std::move(free_.back());
      free_.pop_back();
    } else {
      peak_ = std::max(peak_, ++allocated_);
    }
  }
  if (!block) block = std::make_unique<BatchBlock>(cuda_, device_);
  block->consumer_waited = false;
  std::weak_ptr<BlockPool> pool = weak_from_this();
  return std::shared_ptr<BatchBlock>(block.release(), [pool](BatchBlock* released) {
    if (const auto alive = pool.lock()) {
      alive->give_back(released);
    } else {
      delete released;
    }
  });
}

void BlockPool::give_back(BatchBlock* raw) noexcept {
  std::unique_ptr<BatchBlock> block(raw);
  if (block->cuda && block->consumer_waited && block->released) {
    // The device memory is reused once the consumer's work enqueued so far has run.
    block->cuda->event_record(block->released->get(), block->consumer);
  }
  {
    std::lock_guard lock(mutex_);
    if (free_.size() < keep_) {
      free_.push_back(std::move(block));
      return;
    }
    --allocated_;
  }
  block.reset();  // outside the lock: freeing waits for the block's copies
}

std::uint64_t BlockPool::peak() const {
  std::lock_guard lock(mutex_);
  return peak_;
}

}  // namespace gpucache::runtime::detail
