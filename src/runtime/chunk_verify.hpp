// Chunk-level verification (SPEC.md "Verification" item 6) of the parts of a shard a load uses:
// which chunks a set of byte ranges touches, and the hash check of one chunk with an error that
// names the shard, the chunk, its byte range and the columns inside it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpucache/shard/shard_layout.hpp"

namespace gpucache::runtime::detail {

struct ByteRange {
  std::uint64_t begin = 0;  // absolute file offsets (uncompressed shards)
  std::uint64_t end = 0;
};

ByteRange chunk_range(const shard::Header& header, std::uint64_t chunk) noexcept;
// Indices of the chunks overlapping any non-empty range, ascending and without repeats.
std::vector<std::uint64_t> chunks_touching(const shard::Header& header,
                                           const std::vector<ByteRange>& ranges);
// Hashes `bytes` (the chunk's logical bytes) and throws gpucache::Error on a mismatch.
void check_chunk(std::span<const std::byte> bytes, const shard::Layout& layout, std::uint64_t chunk,
                 const std::string& path);

}  // namespace gpucache::runtime::detail
