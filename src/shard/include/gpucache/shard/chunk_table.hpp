// The chunk table on its own (SPEC.md "Data region and chunks"), for a reader that has the header
// and the table but not the whole file: a remote dataset's shard fetcher (src/remote) checks the
// table exactly as decode_layout does before it fetches a chunk.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "gpucache/shard/shard_layout.hpp"

namespace gpucache::shard {

// Decodes the chunk table (`table`: chunk_count × 24 bytes) and checks each entry's codec and
// stored place against the header (decode_layout's rules for chunks, which it calls; not
// chunks_hash). Throws gpucache::Error(path, "chunk table entry N", cause).
std::vector<ChunkEntry> decode_chunk_table(std::span<const std::byte> table, const Header& header,
                                           const std::string& path);

}  // namespace gpucache::shard
