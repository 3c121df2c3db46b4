// What a Dataset value holds: the checked shard table (shared by every selection made from it) and
// the selection itself; plus the per-load view of one mapped shard.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpucache/runtime.hpp"
#include "gpucache/shard/dataset_check.hpp"
#include "gpucache/shard/shard_layout.hpp"
#include "shard_mapping.hpp"

namespace gpucache::remote {
class RemoteDataset;  // gpucache/remote/remote.hpp, included where it is used
}

namespace gpucache::runtime::detail {

// What opening a dataset learns from its manifest (or a single shard's header): no shard of a
// directory is read until a load needs its rows.
struct ShardTable {
  std::string path;        // as given to Dataset::open
  std::string local_path;  // where the files are: path, or a remote dataset's cache folder
  // A remote dataset (s3://, http(s)://): shards[k].path are files in its cache folder, fetched
  // by map_needed_shards before they are mapped. Null for a local path.
  std::shared_ptr<remote::RemoteDataset> remote;
  std::vector<ShardInfo> shards;  // in dataset order
  // Where each shard's header must place it (its segment's numbering, header hash): checked
  // when the shard is mapped.
  std::vector<shard::ShardPlace> places;
  std::vector<std::uint32_t> segment_of;  // the manifest segment of each shard (0 without)
  std::vector<std::uint64_t> starts;      // row of the dataset where each shard begins
  std::vector<Column> columns;
  std::uint64_t total_rows = 0;
};

struct DatasetState {
  std::shared_ptr<const ShardTable> table;
  std::vector<std::size_t> selected;  // indices into table->columns
  std::vector<Column> columns;        // the selected columns, in selection order
  std::uint64_t row_begin = 0;
  std::uint64_t row_end = 0;
};

// One shard a load needs, mapped, its header checked against the manifest's record of it.
struct MappedShard {
  std::size_t table_index = 0;  // into ShardTable::shards
  std::shared_ptr<const ShardMapping> file;
  std::shared_ptr<const shard::Layout> layout;
  std::uint64_t row_lo = 0, row_hi = 0;  // rows [row_lo, row_hi) of this shard are selected
  std::uint64_t out_row = 0;             // where row_lo lands in the selection
};

// Discovers and checks the shards under `path` (see Dataset::open).
std::shared_ptr<const ShardTable> open_shard_table(const std::string& path,
                                                   const OpenOptions& options = {});
// The shards the selection needs, in row order, with their rows placed but not yet mapped (file
// and layout null): what a batch stream over a remote dataset opens one by one as it goes.
std::vector<MappedShard> needed_shard_slots(const DatasetState& state);
// The dataset id of the first shard mapped in each segment: shards of one segment share it, so a
// shard of another pack run is named as such before its header hash is compared.
struct SegmentIds {
  std::mutex mutex;
  std::map<std::uint32_t, std::uint64_t> first;
};
// Maps one slot of needed_shard_slots (its file, already local) and checks its header against the
// manifest's record of it (decompressing a compressed shard). Safe to call for different slots on
// different threads.
void map_shard(const DatasetState& state, MappedShard& shard, ShardMapping::Access access,
               SegmentIds& segment_ids);
// The shards the selection needs (fetched first for a remote dataset), mapped, in row order.
std::vector<MappedShard> map_needed_shards(const DatasetState& state, ShardMapping::Access access);

}  // namespace gpucache::runtime::detail
