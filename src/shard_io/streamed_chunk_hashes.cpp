#include "gpucache/shard_io/streamed_chunk_hashes.hpp"

#include "gpucache/common/xxh3.hpp"

#include <algorithm>
#include <new>

namespace gpucache::shard {

StreamedChunkHashes::StreamedChunkHashes(std::uint64_t data_size, std::uint64_t chunk_size)
    : data_size_(data_size),
      chunk_size_(chunk_size),
      state_(XXH3_createState()),
      hashes_(chunk_size == 0 ? 0 : (data_size + chunk_size - 1) / chunk_size),
      hashed_(hashes_.size(), false) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(state_);
}

StreamedChunkHashes::~StreamedChunkHashes() {
  XXH3_freeState(state_);
}

void StreamedChunkHashes::add(std::uint64_t offset, std::span<const std::byte> bytes) {
  if (bytes.empty() || chunk_size_ == 0 || offset >= data_size_ ||
      bytes.size() > data_size_ - offset) {
    running_ = false;
    return;
  }
  // Whatever these chunks held before, they hold new bytes now.
  const std::uint64_t end = offset + bytes.size();
  for (std::uint64_t k = offset / chunk_size_; k * chunk_size_ < end; ++k) hashed_[k] = false;

  if (!running_ || offset != cursor_) {
    // A new run of stores: it can only hash the chunks it starts at the beginning of.
    const std::uint64_t start = (offset + chunk_size_ - 1) / chunk_size_ * chunk_size_;
    if (start >= end) {
      running_ = false;
      return;
    }
    bytes = bytes.subspan(start - offset);
    offset = start;
    XXH3_64bits_reset(state_);
  }
  while (!bytes.empty()) {
    const std::uint64_t chunk = offset / chunk_size_;
    const std::uint64_t chunk_end = std::min((chunk + 1) * chunk_size_, data_size_);
    const std::uint64_t take = std::min<std::uint64_t>(bytes.size(), chunk_end - offset);
    XXH3_64bits_update(state_, bytes.data(), take);
    bytes = bytes.subspan(take);
    offset += take;
    if (offset == chunk_end) {
      hashes_[chunk] = XXH3_64bits_digest(state_);
      hashed_[chunk] = true;
      XXH3_64bits_reset(state_);
    }
  }
  cursor_ = offset;
  running_ = true;
}

std::optional<std::uint64_t> StreamedChunkHashes::hash(std::uint64_t chunk) const {
  if (chunk >= hashes_.size() || !hashed_[chunk]) return std::nullopt;
  return hashes_[chunk];
}

}  // namespace gpucache::shard
