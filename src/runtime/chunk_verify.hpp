// The shard format's chunk rules as the loaders use them: they live in the shard module
// (gpucache/shard/chunks.hpp), which verify and the tools' reader call too.
#pragma once

#include "gpucache/shard/chunks.hpp"

namespace gpucache::runtime::detail {

using shard::ByteRange;
using shard::chunk_range;
using shard::chunks_touching;

inline void check_chunk(std::span<const std::byte> bytes, const shard::Layout& layout,
                        std::uint64_t chunk, const std::string& path) {
  shard::check_chunk_hash(bytes, layout, chunk, path);
}

}  // namespace gpucache::runtime::detail
