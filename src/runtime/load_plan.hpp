// What a load reads from each mapped shard: the byte range of every selected column's rows, and
// the helpers that hash the chunks under those ranges on a thread pool; for copying loads, the
// plan of where each of those bytes goes (plan_copies), which sources then carry out.
#pragma once

#include <cstdint>
#include <span>
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

// `bytes` bytes from file offset `source` go to byte `destination` of the destination.
struct CopyItem {
  std::uint64_t source = 0;
  std::uint64_t destination = 0;
  std::uint64_t bytes = 0;
};

// One shard's part of a copying load.
struct ShardCopies {
  const MappedShard* shard = nullptr;
  std::vector<CopyItem> copies;  // sorted by source
};
// The ranges of the shard that `copies` read, in their order (some may be empty).
std::vector<ByteRange> source_ranges(const ShardCopies& copies);

// Where the selected tensor columns go in one allocation: column by column, each column's rows from
// every shard contiguous, at offsets aligned to shard::kAlignment (4096). Text columns stay behind.
struct TensorLayout {
  std::vector<DeviceColumn> columns;   // `data` not yet set
  std::vector<std::size_t> positions;  // each column's position in the selection
  std::uint64_t bytes = 0;             // the allocation's size
};
TensorLayout plan_tensor_layout(const DatasetState& state);

// What a copying load does: which bytes (every needed shard, mapped, with the copies that take its
// selected rows to their place in the layout), in what order (shards in row order, each by file
// offset), verified how (each chunk the copies touch hashed once, on `threads` CPU threads).
struct CopyPlan {
  std::vector<MappedShard> shards;  // owns the mappings the copies read
  std::vector<ShardCopies> copies;  // one per shard, pointing into `shards`
  bool verify = true;
  unsigned threads = 1;
  std::size_t staging_bytes = 0;   // per staging buffer or window (raised to the chunk size)
  std::uint64_t bytes_copied = 0;  // the copies' total

  CopyPlan() = default;
  CopyPlan(CopyPlan&&) = default;  // `copies` keeps pointing into the moved vector's elements
  CopyPlan(const CopyPlan&) = delete;
  CopyPlan& operator=(const CopyPlan&) = delete;
};
// Maps the shards the selection needs (read-only) and plans the copies of `layout`'s columns.
CopyPlan plan_copies(const DatasetState& state, const TensorLayout& layout,
                     const DeviceOptions& options);

}  // namespace gpucache::runtime::detail
