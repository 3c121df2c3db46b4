#include "window_copy.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "gpucache/error.hpp"
#include "staging_ring.hpp"
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
std::vector<Window> plan_windows(std::span<const ShardCopies> shards, bool verify,
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

std::uint64_t copy_windows(std::span<const ShardCopies> shards, Destination& destination,
                           const SourceOptions& options, WindowRead read) {
  if (read == WindowRead::in_place && destination.stream())
    throw std::logic_error("copy_windows: a stream reads only pinned memory, not the mapping");
  if (shards.empty()) return 0;
  std::uint64_t limit = std::max<std::uint64_t>(options.staging_bytes, 64 << 10);
  if (options.verify)
    for (const auto& planned : shards)
      limit = std::max(limit, planned.shard->layout->header.chunk_size);
  const auto windows = plan_windows(shards, options.verify, limit);
  if (windows.empty()) return 0;
  const unsigned threads =
      static_cast<unsigned>(std::min<std::size_t>(options.threads, windows.size()));

  std::optional<StagingRing> ring;
  if (read == WindowRead::pread)
    ring.emplace(destination.stream() ? options.cuda : nullptr, destination.stream(), threads + 2,
                 limit);
  std::atomic<std::uint64_t> verified{0};
  TaskPool pool(threads);  // declared last: its workers stop before the ring goes away

  for (const Window& window : windows) {
    pool.submit([&, window] {
      const ShardCopies& planned = shards[window.shard];
      const MappedShard& shard = *planned.shard;
      const std::string& path = shard.file->path();
      std::optional<StagingRing::Lease> lease;
      const std::byte* bytes = shard.file->data() + window.range.begin;
      if (ring) {
        lease.emplace(ring->acquire());
        if (shard.file->decompressed())  // the file holds compressed bytes: copy the image
          std::memcpy(lease->data(), bytes, window.range.end - window.range.begin);
        else
          pread_full(OpenFile(path).get(), lease->data(), window.range, path);
        bytes = lease->data();
      }
      for (std::uint64_t chunk = window.first_chunk; chunk < window.end_chunk; ++chunk) {
        const ByteRange range = chunk_range(shard.layout->header, chunk);
        check_chunk({bytes + (range.begin - window.range.begin), range.end - range.begin},
                    *shard.layout, chunk, path);
        verified += range.end - range.begin;
      }
      for (const CopyItem& copy : planned.copies) {
        const std::uint64_t begin = std::max(copy.source, window.range.begin);
        const std::uint64_t end = std::min(copy.source + copy.bytes, window.range.end);
        if (begin >= end) continue;
        destination.write(copy.destination + (begin - copy.source),
                          bytes + (begin - window.range.begin), end - begin, path);
      }
      if (lease) lease->fence();
    });
  }
  pool.wait();
  return verified;
}

}  // namespace gpucache::runtime::detail
