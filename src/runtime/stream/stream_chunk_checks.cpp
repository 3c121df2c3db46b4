#include "stream_chunk_checks.hpp"

#include "chunk_verify.hpp"

namespace gpucache::runtime::detail {

ChunkChecks::ChunkChecks(const std::vector<MappedShard>& shards)
    : shards_(shards), stamps_(shards.size()) {
  for (std::size_t s = 0; s < shards.size(); ++s)
    if (shards[s].layout) add(s);
}

void ChunkChecks::add(std::size_t shard) {
  const std::uint64_t chunks = shards_[shard].layout->header.chunk_count;
  stamps_[shard] = std::make_unique<std::atomic<std::uint64_t>[]>(chunks);
  for (std::uint64_t k = 0; k < chunks; ++k) stamps_[shard][k].store(0);
}

void ChunkChecks::ensure(std::size_t shard, std::uint64_t begin, std::uint64_t end,
                         std::uint64_t generation) {
  if (begin >= end) return;
  const MappedShard& mapped = shards_[shard];
  const auto& header = mapped.layout->header;
  const std::uint64_t first = (begin - header.data_offset) / header.chunk_size;
  const std::uint64_t last = (end - 1 - header.data_offset) / header.chunk_size;
  for (std::uint64_t k = first; k <= last && k < header.chunk_count; ++k) {
    std::atomic<std::uint64_t>& stamp = stamps_[shard][k];
    if (stamp.load(std::memory_order_acquire) == generation) continue;
    std::lock_guard lock(locks_[(shard * 31 + k) % locks_.size()]);
    if (stamp.load(std::memory_order_acquire) == generation) continue;
    const ByteRange range = chunk_range(header, k);
    check_chunk({mapped.file->data() + range.begin, range.end - range.begin}, *mapped.layout, k,
                mapped.file->path());
    bytes_ += range.end - range.begin;
    stamp.store(generation, std::memory_order_release);
  }
}

}  // namespace gpucache::runtime::detail
