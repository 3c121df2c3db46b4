// What a load reads from each mapped shard: the byte range of every selected column's rows, the
// offsets of variable-length columns (text, sequences) made trustworthy before any value is read
// through them, and the helpers that hash the chunks under those ranges on a thread pool; for
// copying loads, where each column goes in the one allocation (plan_device_layout) and the plan of
// where each byte goes (plan_copies), which sources then carry out.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "chunk_verify.hpp"
#include "dataset_state.hpp"
#include "task_pool.hpp"

namespace gpucache::runtime::detail {

// The selected rows of column `selected_position` in one shard. Tensor columns: the stored rows,
// row_pitch_bytes() each, whatever the row shape. Text and sequence columns: the u64 offsets of
// those rows (rows + 1 of them); their values come later, once the offsets are trusted
// (values_range).
ByteRange column_rows_range(const DatasetState& state, const MappedShard& shard,
                            std::size_t selected_position);
// The values (UTF-8 bytes for text) of the selected rows of a variable-length column, whose
// offsets passed check_offsets.
ByteRange values_range(const DatasetState& state, const MappedShard& shard,
                       std::size_t selected_position);

// What check_offsets hashed: per shard, the sorted chunk indices (for later hashing to skip), and
// their bytes.
struct CheckedOffsets {
  std::vector<std::vector<std::uint64_t>> verified;
  std::uint64_t bytes_verified = 0;
};
// Makes the offsets of the selected rows of the variable-length columns at `positions` (of the
// selection) trustworthy before any value is read through them: with `verify`, hashes the chunks
// under them first; then, verify or not, checks them against the shard format's offsets rule
// (shard::find_bad_offset: never decreasing, within the column's values; for a whole shard also
// starting at 0 and ending at the last value), so a corrupt offset can never send a read outside
// the mapping. Runs on `threads` threads; throws the first hash mismatch or bad offset.
CheckedOffsets check_offsets(const DatasetState& state, const std::vector<MappedShard>& shards,
                             const std::vector<std::size_t>& positions, bool verify,
                             unsigned threads);

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

// Where the selected tensor and sequence columns go in one allocation, every region at an offset
// aligned to shard::kAlignment (4096). First the rebased int64 offsets of every sequence column
// (bytes [0, offsets_bytes), which the host computes: fill_sequence_offsets), then each column's
// data in selection order: a tensor column's rows from every shard contiguous (one [rows,
// *stored row] array), a sequence column's selected values from every shard contiguous. Text
// columns stay behind.
struct DeviceLayout {
  std::vector<DeviceColumn> columns;   // `data` and `offsets` not yet set
  std::vector<std::size_t> positions;  // each column's position in the selection
  std::uint64_t offsets_bytes = 0;     // the leading part holding the sequence offsets
  std::uint64_t bytes = 0;             // the allocation's size
};
// `shards` are the mapped shards of the selection whose sequence offsets passed check_offsets.
DeviceLayout plan_device_layout(const DatasetState& state, const std::vector<MappedShard>& shards);
// Before any shard is mapped: an upper bound of plan_device_layout's bytes (placement="auto"
// decides with it). Tensor columns exactly (rows × row pitch, each rounded up to kAlignment),
// sequence columns as their rows + 1 offsets plus the sizes of the shards the selection needs.
std::uint64_t device_bytes_bound(const DatasetState& state);
// Positions (in the selection) of the columns of these kinds.
std::vector<std::size_t> positions_of(const DatasetState& state,
                                      std::initializer_list<ColumnKind> kinds);
// Writes bytes [0, layout.offsets_bytes) of the allocation to `out`: for each sequence column,
// rows + 1 int64 offsets counting from the first selected value (row i is values [out[i],
// out[i + 1]), out[0] = 0), its shards' offsets rebased; zeros between the regions.
void fill_sequence_offsets(const DatasetState& state, const std::vector<MappedShard>& shards,
                           const DeviceLayout& layout, std::byte* out, unsigned threads);

// What a copying load does: which bytes (every needed shard, mapped, with the copies that take its
// selected tensor rows and sequence values to their place in the layout), in what order (shards in
// row order, each by file offset), verified how (each chunk the copies touch hashed once, on
// `threads` CPU threads).
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
// Plans the copies of `layout`'s columns out of `shards` (the selection's shards, mapped
// read-only, whose sequence offsets passed check_offsets), which the plan then owns.
CopyPlan plan_copies(const DatasetState& state, std::vector<MappedShard> shards,
                     const DeviceLayout& layout, const DeviceOptions& options);

}  // namespace gpucache::runtime::detail
