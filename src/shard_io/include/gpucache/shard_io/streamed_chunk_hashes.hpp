// Hashes a shard's data chunks from the bytes ShardBuilder::store() is given, while they are still
// in cache, so write() need not read them back from the page cache (a page fault per page, then
// unmapping) to hash them. Only chunks made entirely of consecutive stores are hashed here; write()
// hashes the others (column boundaries, text and provenance columns filled in place).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

struct XXH3_state_s;

namespace gpucache::shard {

class StreamedChunkHashes {
 public:
  // Chunks of `chunk_size` bytes over a data region of `data_size` bytes, the last one shorter.
  StreamedChunkHashes(std::uint64_t data_size, std::uint64_t chunk_size);
  ~StreamedChunkHashes();
  StreamedChunkHashes(const StreamedChunkHashes&) = delete;
  StreamedChunkHashes& operator=(const StreamedChunkHashes&) = delete;

  // The final bytes of [offset, offset + bytes.size()) of the data region. Chunks they overlap
  // lose any hash they had; chunks they complete (continuing the previous call's range) get one.
  void add(std::uint64_t offset, std::span<const std::byte> bytes);
  // XXH3-64 of chunk k, when every byte of it came through add() in order and was not replaced.
  std::optional<std::uint64_t> hash(std::uint64_t chunk) const;
  std::uint64_t chunk_size() const noexcept { return chunk_size_; }

 private:
  std::uint64_t data_size_;
  std::uint64_t chunk_size_;
  std::uint64_t cursor_ = 0;  // where the running chunk's hashed bytes end
  bool running_ = true;       // the state holds the bytes of chunk cursor_ / chunk_size_ so far
  XXH3_state_s* state_;
  std::vector<std::uint64_t> hashes_;
  std::vector<bool> hashed_;
};

}  // namespace gpucache::shard
