// Reusable staging buffers that reader threads fill (with pread) before the bytes go on to their
// destination. For a destination that copies on a CUDA stream the buffers are pinned
// (cudaHostAlloc) and each has an event: a buffer is recorded ("fenced") after the copies out of it
// are enqueued, and acquire() hands it out again only once those copies have completed. For a
// destination the CPU writes, they are plain page-aligned memory, free again as soon as released.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

#include "cuda_api.hpp"
#include "cuda_stream.hpp"

namespace gpucache::runtime::detail {

class StagingRing {
 public:
  // `count` buffers of `bytes` each. With `cuda`, pinned and fenced on `stream` (which must be the
  // stream the copies out of them run on); without, plain memory. Throws gpucache::Error (location
  // "staging") when the memory cannot be had.
  StagingRing(const CudaApi* cuda, cuda_stream_t stream, std::size_t count, std::size_t bytes);
  // Waits for the copies out of every buffer before freeing it.
  ~StagingRing();
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  // One buffer, held by one thread until the lease goes.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    // Returns the buffer to the ring. A pinned buffer that was not fenced is fenced now: a task
    // that failed midway may have enqueued copies out of it.
    ~Lease();

    std::byte* data() const noexcept;
    std::size_t size() const noexcept;
    // Call after the copies out of this buffer are enqueued on the ring's stream (nothing to do
    // for plain buffers).
    void fence();

   private:
    friend class StagingRing;
    Lease(StagingRing& ring, std::size_t index) : ring_(&ring), index_(index) {}
    StagingRing* ring_;
    std::size_t index_;
    bool fenced_ = false;
  };

  // Blocks until a buffer is free and the copies out of it have completed.
  Lease acquire();
  bool pinned() const noexcept { return cuda_ != nullptr; }
  std::size_t count() const noexcept { return buffers_.size(); }

 private:
  struct Buffer {
    std::byte* data = nullptr;
    std::optional<CudaEvent> event;  // pinned buffers only
    bool in_flight = false;          // fenced since it was last waited for
  };
  void allocate(std::size_t count);
  void release(std::size_t index, bool fenced) noexcept;
  void free_all() noexcept;

  const CudaApi* cuda_;
  cuda_stream_t stream_;
  std::size_t bytes_;
  std::vector<Buffer> buffers_;
  std::vector<std::size_t> free_;
  std::mutex mutex_;
  std::condition_variable available_;
};

}  // namespace gpucache::runtime::detail
