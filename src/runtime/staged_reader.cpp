#include "staged_reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "task_pool.hpp"

namespace gpucache::runtime::detail {
namespace {

struct Window {
  std::size_t shard = 0;
  ByteRange range;
  std::uint64_t first_chunk = 0, end_chunk = 0;  // whole chunks inside, when verifying
};

std::vector<ByteRange> merged_ranges(const std::vector<CopyItem>& copies) {
  std::vector<ByteRange> ranges;
  for (const auto& copy : copies) {
    if (copy.bytes == 0) continue;
    if (!ranges.empty() && copy.source <= ranges.back().end)
      ranges.back().end = std::max(ranges.back().end, copy.source + copy.bytes);
    else
      ranges.push_back({copy.source, copy.source + copy.bytes});
  }
  return ranges;
}

// Windows of at most `limit` bytes. When verifying, a window holds whole chunks (at least one,
// so `limit` must be at least the chunk size) and every touched chunk is in exactly one window.
std::vector<Window> plan_windows(const std::vector<StagedShard>& shards, bool verify,
                                 std::uint64_t limit) {
  std::vector<Window> windows;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const auto ranges = merged_ranges(shards[s].copies);
    if (verify) {
      const auto& header = shards[s].shard->layout->header;
      for (const std::uint64_t chunk : chunks_touching(header, ranges)) {
        const ByteRange range = chunk_range(header, chunk);
        Window* last = windows.empty() ? nullptr : &windows.back();
        if (last && last->shard == s && last->end_chunk == chunk &&
            range.end - last->range.begin <= limit) {
          last->range.end = range.end;
          last->end_chunk = chunk + 1;
        } else {
          windows.push_back({s, range, chunk, chunk + 1});
        }
      }
    } else {
      for (const auto& range : ranges)
        for (std::uint64_t at = range.begin; at < range.end; at += limit)
          windows.push_back({s, {at, std::min(range.end, at + limit)}, 0, 0});
    }
  }
  return windows;
}

void pread_full(int fd, std::byte* out, ByteRange range, const std::string& path) {
  std::uint64_t done = 0;
  const std::uint64_t size = range.end - range.begin;
  while (done < size) {
    const ssize_t got =
        ::pread(fd, out + done, size - done, static_cast<off_t>(range.begin + done));
    if (got < 0 && errno == EINTR) continue;
    const std::string where =
        "bytes " + std::to_string(range.begin) + "-" + std::to_string(range.end - 1);
    if (got < 0) throw Error(path, where, std::string("read failed: ") + std::strerror(errno));
    if (got == 0)
      throw Error(path, where,
                  "the file ended at byte " + std::to_string(range.begin + done) +
                      " (truncated while loading?)");
    done += static_cast<std::uint64_t>(got);
  }
}

// Buffers handed out one per worker and reused. With a CUDA sink they are pinned, and an event
// recorded after the copies out of a buffer must complete before it is filled again.
class StagingRing {
 public:
  StagingRing(const CudaApi* cuda, cuda_stream_t stream, std::size_t count, std::size_t bytes)
      : cuda_(cuda), stream_(stream) {
    buffers_.resize(count);
    try {
      allocate(bytes);
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~StagingRing() { destroy(); }
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

 private:
  void allocate(std::size_t bytes) {
    for (auto& buffer : buffers_) {
      void* memory = nullptr;
      if (cuda_) {
        check_cuda(*cuda_, cuda_->host_alloc(&memory, bytes, 0), "staging",
                   "cudaHostAlloc of " + std::to_string(bytes) + " bytes");
        buffer.data = static_cast<std::byte*>(memory);
        check_cuda(*cuda_, cuda_->event_create_with_flags(&buffer.event, kCudaEventDisableTiming),
                   "staging", "cudaEventCreateWithFlags");
      } else {
        memory = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
        if (!memory) throw Error("", "staging", "out of memory for the staging buffers");
        buffer.data = static_cast<std::byte*>(memory);
      }
      free_.push_back(static_cast<std::size_t>(&buffer - buffers_.data()));
    }
  }
  void destroy() noexcept {
    for (auto& buffer : buffers_) {
      if (cuda_) {
        if (buffer.event) {
          cuda_->event_synchronize(buffer.event);
          cuda_->event_destroy(buffer.event);
        }
        if (buffer.data) cuda_->free_host(buffer.data);
      } else {
        std::free(buffer.data);
      }
    }
  }

 public:
  class Lease {
   public:
    Lease(StagingRing& ring, std::size_t index) : ring_(ring), index_(index) {}
    ~Lease() {
      // A task that failed midway may have enqueued copies out of this buffer: keep it fenced.
      if (ring_.cuda_ && !recorded_)
        recorded_ =
            ring_.cuda_->event_record(ring_.buffers_[index_].event, ring_.stream_) == kCudaSuccess;
      ring_.release(index_, recorded_);
    }
    std::byte* data() const { return ring_.buffers_[index_].data; }
    // After the copies out of this buffer are enqueued on the ring's stream.
    void record() {
      check_cuda(*ring_.cuda_,
                 ring_.cuda_->event_record(ring_.buffers_[index_].event, ring_.stream_), "staging",
                 "cudaEventRecord");
      recorded_ = true;
    }

   private:
    StagingRing& ring_;
    std::size_t index_;
    bool recorded_ = false;
  };

  std::size_t acquire() {
    std::unique_lock lock(mutex_);
    available_.wait(lock, [this] { return !free_.empty(); });
    const std::size_t index = free_.back();
    free_.pop_back();
    const bool pending = buffers_[index].pending;
    lock.unlock();
    if (pending)
      check_cuda(*cuda_, cuda_->event_synchronize(buffers_[index].event), "staging",
                 "cudaEventSynchronize");
    return index;
  }

 private:
  struct Buffer {
    std::byte* data = nullptr;
    cuda_event_t event = nullptr;
    bool pending = false;
  };
  void release(std::size_t index, bool recorded) {
    {
      std::lock_guard lock(mutex_);
      buffers_[index].pending = recorded;
      free_.push_back(index);
    }
    available_.notify_one();
  }

  const CudaApi* cuda_;
  cuda_stream_t stream_;
  std::vector<Buffer> buffers_;
  std::vector<std::size_t> free_;
  std::mutex mutex_;
  std::condition_variable available_;
};

// One descriptor per window rather than per shard: a dataset of thousands of small shards must not
// run into the open-file limit, and an open costs little next to a multi-MiB read.
class OpenFile {
 public:
  explicit OpenFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw Error(path, "", std::string("cannot open: ") + std::strerror(errno));
  }
  ~OpenFile() { ::close(fd_); }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

StagedResult run_staged(const std::vector<StagedShard>& shards, const StagedOptions& options) {
  StagedResult result;
  if (shards.empty()) return result;
  std::uint64_t limit = std::max<std::uint64_t>(options.staging_bytes, 64 << 10);
  if (options.verify)
    for (const auto& staged : shards)
      limit = std::max(limit, staged.shard->layout->header.chunk_size);
  const auto windows = plan_windows(shards, options.verify, limit);
  if (windows.empty()) return result;
  const unsigned threads =
      static_cast<unsigned>(std::min<std::size_t>(options.threads, windows.size()));

  std::optional<StagingRing> ring;
  if (options.read_with_pread || options.cuda)
    ring.emplace(options.cuda, options.stream, threads + 2, limit);
  std::atomic<std::uint64_t> verified{0};
  TaskPool pool(threads);  // declared last: its workers stop before the ring goes away

  for (const Window& window : windows) {
    pool.submit([&, window] {
      const StagedShard& staged = shards[window.shard];
      const MappedShard& shard = *staged.shard;
      const std::string& path = shard.file->path();
      std::optional<StagingRing::Lease> lease;
      const std::byte* bytes = shard.file->data() + window.range.begin;
      if (ring) {
        lease.emplace(*ring, ring->acquire());
        if (options.read_with_pread) {
          pread_full(OpenFile(path).get(), lease->data(), window.range, path);
        } else {
          std::memcpy(lease->data(), bytes, window.range.end - window.range.begin);
        }
        bytes = lease->data();
      }
      for (std::uint64_t chunk = window.first_chunk; chunk < window.end_chunk; ++chunk) {
        const ByteRange range = chunk_range(shard.layout->header, chunk);
        check_chunk({bytes + (range.begin - window.range.begin), range.end - range.begin},
                    *shard.layout, chunk, path);
        verified += range.end - range.begin;
      }
      for (const CopyItem& copy : staged.copies) {
        const std::uint64_t begin = std::max(copy.source, window.range.begin);
        const std::uint64_t end = std::min(copy.source + copy.bytes, window.range.end);
        if (begin >= end) continue;
        std::byte* to = options.target + copy.destination + (begin - copy.source);
        const std::byte* from = bytes + (begin - window.range.begin);
        if (options.cuda) {
          check_cuda(*options.cuda,
                     options.cuda->memcpy_async(to, from, end - begin, kCudaMemcpyHostToDevice,
                                                options.stream),
                     path, "cudaMemcpyAsync of " + std::to_string(end - begin) + " bytes");
        } else {
          std::memcpy(to, from, end - begin);
        }
      }
      if (options.cuda) lease->record();
    });
  }
  pool.wait();
  result.bytes_verified = verified;
  return result;
}

}  // namespace gpucache::runtime::detail
