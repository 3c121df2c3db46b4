// What a load reads from each mapped shard: the byte range of every selected column's rows, and
// the helpers that hash the chunks under those ranges on a thread pool.
#pragma once

#include <cstdint>
#include <vector>

#include "chunk_verify.hpp"
#include "dataset_state.hpp"
#include "task_pool.hpp"

namespace gpucache::runtime::detail {

// The selected rows of column `selected_position` in one shard. Tensor columns: the padded rows.
// Text columns: the u64 offsets of those rows (rows + 1 of them); their UTF-8 bytes come later,
// once the offsets are trusted (text_bytes_range).
ByteRange column_rows_range(const DatasetState& state, const MappedShard& shard,
                            std::size_t selected_position);
// The UTF-8 bytes of the selected rows of a text column whose offsets passed check_text_offsets.
ByteRange text_bytes_range(const DatasetState& state, const MappedShard& shard,
                           std::size_t selected_position);
// Offsets of the selected rows must not decrease and must stay within the column's text bytes,
// so text() can never read outside the mapping even when verification is off.
void check_text_offsets(const DatasetState& state, const MappedShard& shard,
                        std::size_t selected_position);
// Hints the kernel to start reading these ranges of the mapping.
void advise_will_need(const MappedShard& shard, const std::vector<ByteRange>& ranges) noexcept;
// Submits one hashing task per chunk touching `ranges` that is not yet in `done` (sorted chunk
// indices, updated). Tasks read the chunk from the mapping and throw on a mismatch.
std::uint64_t submit_chunk_checks(TaskPool& pool, const MappedShard& shard,
                                  const std::vector<ByteRange>& ranges,
                                  std::vector<std::uint64_t>& done);

}  // namespace gpucache::runtime::detail
