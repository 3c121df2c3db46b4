#include "staging_ring.hpp"

#include <cstdlib>
#include <string>
#include <utility>

#include "gpucache/error.hpp"

namespace gpucache::runtime::detail {

StagingRing::StagingRing(const CudaApi* cuda, cuda_stream_t stream, std::size_t count,
                         std::size_t bytes)
    : cuda_(cuda), stream_(stream), bytes_(bytes) {
  try {
    allocate(count);
  } catch (...) {
    free_all();
    throw;
  }
}

StagingRing::~StagingRing() {
  free_all();
}

void StagingRing::allocate(std::size_t count) {
  buffers_.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    Buffer& buffer = buffers_.emplace_back();
    void* memory = nullptr;
    if (cuda_) {
      check_cuda(*cuda_, cuda_->host_alloc(&memory, bytes_, 0), "staging",
                 "cudaHostAlloc of " + std::to_string(bytes_) + " bytes");
      buffer.data = static_cast<std::byte*>(memory);
      buffer.event.emplace(*cuda_, "staging");
    } else {
      memory = std::aligned_alloc(4096, (bytes_ + 4095) / 4096 * 4096);
      if (!memory) throw Error("", "staging", "out of memory for the staging buffers");
      buffer.data = static_cast<std::byte*>(memory);
    }
    free_.push_back(i);
  }
}

void StagingRing::free_all() noexcept {
  for (auto& buffer : buffers_) {
    if (cuda_) {
      if (buffer.event) cuda_->event_synchronize(buffer.event->get());
      if (buffer.data) cuda_->free_host(buffer.data);
    } else {
      std::free(buffer.data);
    }
  }
  buffers_.clear();
}

StagingRing::Lease StagingRing::acquire() {
  std::unique_lock lock(mutex_);
  available_.wait(lock, [this] { return !free_.empty(); });
  const std::size_t index = free_.back();
  free_.pop_back();
  Buffer& buffer = buffers_[index];
  const bool in_flight = std::exchange(buffer.in_flight, false);
  lock.unlock();
  Lease lease(*this, index);  // returns the buffer should the wait below throw
  if (in_flight) buffer.event->synchronize();
  return lease;
}

void StagingRing::release(std::size_t index, bool fenced) noexcept {
  {
    std::lock_guard lock(mutex_);
    buffers_[index].in_flight = fenced;
    free_.push_back(index);
  }
  available_.notify_one();
}

StagingRing::Lease::Lease(Lease&& other) noexcept
    : ring_(std::exchange(other.ring_, nullptr)), index_(other.index_), fenced_(other.fenced_) {}

StagingRing::Lease::~Lease() {
  if (!ring_) return;
  Buffer& buffer = ring_->buffers_[index_];
  if (ring_->cuda_ && !fenced_)
    fenced_ = ring_->cuda_->event_record(buffer.event->get(), ring_->stream_) == kCudaSuccess;
  ring_->release(index_, fenced_);
}

std::byte* StagingRing::Lease::data() const noexcept {
  return ring_->buffers_[index_].data;
}

std::size_t StagingRing::Lease::size() const noexcept {
  return ring_->bytes_;
}

void StagingRing::Lease::fence() {
  if (!ring_->cuda_) return;
  ring_->buffers_[index_].event->record(ring_->stream_);
  fenced_ = true;
}

}  // namespace gpucache::runtime::detail
