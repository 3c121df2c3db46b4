// Dataset: opening, selections and rank slicing. Loading lives in host_load.cpp and
// device_load.cpp.
#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "dataset_state.hpp"
#include "gpucache/common/parallel.hpp"
#include "gpucache/remote/remote.hpp"
#include "load_plan.hpp"
#include "task_pool.hpp"

namespace gpucache::runtime {

using detail::DatasetState;

Dataset Dataset::open(const std::string& path) {
  return open(path, OpenOptions{});
}

Dataset Dataset::open(const std::string& path, const OpenOptions& options) {
  auto state = std::make_shared<DatasetState>();
  state->table = detail::open_shard_table(path, options);
  state->columns = state->table->columns;
  for (std::size_t i = 0; i < state->columns.size(); ++i) state->selected.push_back(i);
  state->row_end = state->table->total_rows;
  return Dataset(std::move(state));
}

const std::string& Dataset::path() const noexcept {
  return state_->table->path;
}
const std::string& Dataset::local_path() const noexcept {
  return state_->table->local_path;
}
std::uint64_t Dataset::total_rows() const noexcept {
  return state_->table->total_rows;
}
std::uint64_t Dataset::row_begin() const noexcept {
  return state_->row_begin;
}
std::uint64_t Dataset::row_end() const noexcept {
  return state_->row_end;
}
const std::vector<Column>& Dataset::all_columns() const noexcept {
  return state_->table->columns;
}
const std::vector<Column>& Dataset::columns() const noexcept {
  return state_->columns;
}
const std::vector<ShardInfo>& Dataset::shards() const noexcept {
  return state_->table->shards;
}

std::vector<std::size_t> Dataset::needed_shards() const {
  std::vector<std::size_t> needed;
  const auto& table = *state_->table;
  for (std::size_t k = 0; k < table.shards.size(); ++k) {
    const std::uint64_t begin = table.starts[k], end = begin + table.shards[k].rows;
    if (begin < state_->row_end && end > state_->row_begin && begin < end) needed.push_back(k);
  }
  return needed;
}

std::uint64_t Dataset::device_bytes_bound() const {
  return detail::device_bytes_bound(*state_);
}

Dataset Dataset::select_columns(const std::vector<std::string>& names) const {
  const auto& all = state_->table->columns;
  if (names.empty()) throw Error(path(), "columns", "select at least one column");
  auto state = std::make_shared<DatasetState>(*state_);
  state->selected.clear();
  state->columns.clear();
  for (const auto& name : names) {
    const auto it = std::find_if(all.begin(), all.end(),
                                 [&](const Column& column) { return column.name == name; });
    if (it == all.end()) {
      std::string known;
      for (const auto& column : all) known += (known.empty() ? "" : ", ") + column.name;
      throw Error(path(), "column '" + name + "'", "no such column; the dataset has " + known);
    }
    const auto index = static_cast<std::size_t>(it - all.begin());
    if (std::find(state->selected.begin(), state->selected.end(), index) != state->selected.end())
      throw Error(path(), "column '" + name + "'", "selected twice");
    state->selected.push_back(index);
    state->columns.push_back(*it);
  }
  return Dataset(std::move(state));
}

Dataset Dataset::select_rows(std::uint64_t begin, std::uint64_t end) const {
  if (begin > end || end > rows())
    throw Error(path(), "rows " + std::to_string(begin) + ".." + std::to_string(end),
                "outside the selection of " + std::to_string(rows()) + " rows");
  auto state = std::make_shared<DatasetState>(*state_);
  state->row_begin = state_->row_begin + begin;
  state->row_end = state_->row_begin + end;
  return Dataset(std::move(state));
}

Dataset Dataset::for_rank(std::uint32_t rank, std::uint32_t world_size) const {
  if (world_size == 0 || rank >= world_size)
    throw Error(
        path(), "rank " + std::to_string(rank),
        "must be below world_size " + std::to_string(world_size) + " (and world_size at least 1)");
  const std::uint64_t per_rank = rows() / world_size;
  return select_rows(rank * per_rank, (rank + 1) * per_rank);
}

Dataset Dataset::share_for_rank(std::uint32_t rank, std::uint32_t world_size) const {
  if (world_size == 0 || rank >= world_size)
    throw Error(
        path(), "rank " + std::to_string(rank),
        "must be below world_size " + std::to_string(world_size) + " (and world_size at least 1)");
  const std::uint64_t per_rank = rows() / world_size, extra = rows() % world_size;
  const std::uint64_t begin = rank * per_rank + std::min<std::uint64_t>(rank, extra);
  return select_rows(begin, begin + per_rank + (rank < extra ? 1 : 0));
}

namespace detail {

std::vector<MappedShard> needed_shard_slots(const DatasetState& state) {
  const auto& table = *state.table;
  std::vector<MappedShard> slots;
  std::uint64_t out_row = 0;
  for (std::size_t k = 0; k < table.shards.size(); ++k) {
    const std::uint64_t begin = table.starts[k], end = begin + table.shards[k].rows;
    const std::uint64_t lo = std::max(begin, state.row_begin), hi = std::min(end, state.row_end);
    if (lo >= hi) continue;
    MappedShard slot;
    slot.table_index = k;
    slot.row_lo = lo - begin;
    slot.row_hi = hi - begin;
    slot.out_row = out_row;
    out_row += hi - lo;
    slots.push_back(std::move(slot));
  }
  return slots;
}

void map_shard(const DatasetState& state, MappedShard& shard, ShardMapping::Access access,
               SegmentIds& segment_ids) {
  const auto& table = *state.table;
  const std::size_t k = shard.table_index;
  const ShardInfo& info = table.shards[k];
  std::error_code error;
  if (!std::filesystem::exists(info.path, error))
    throw Error(info.path, "", "missing: listed in manifest.json but not on disk");
  auto file = ShardMapping::open(info.path, access);
  auto layout = std::make_shared<shard::Layout>(
      shard::decode_layout({file->data(), file->size()}, info.path));
  const shard::Header& header = layout->header;
  if (header.has_dataset_fields()) {
    const std::lock_guard lock(segment_ids.mutex);
    const auto [seen, inserted] =
        segment_ids.first.try_emplace(table.segment_of[k], header.dataset_id);
    if (!inserted && seen->second != header.dataset_id)
      throw Error(info.path, "header byte 152",
                  "belongs to another dataset than the shards before it (its dataset id "
                  "differs): shards from different packs were mixed");
  }
  if (auto cause = shard::place_mismatch(header, table.places[k]))
    throw Error(info.path, "header", *cause + " according to " + shard::kManifestName);
  bool same_columns = layout->columns.size() == table.columns.size();
  for (std::size_t c = 0; same_columns && c < table.columns.size(); ++c)
    same_columns = static_cast<const Column&>(layout->columns[c]) == table.columns[c];
  if (!same_columns) throw Error(info.path, "column table", "columns differ from the manifest");
  // A compressed shard is decompressed into private memory laid out like its mapping, after
  // its header has been checked against the manifest.
  if (header.compressed())
    file = ShardMapping::decompress(
        *file, *layout, gpucache::detail::resolve_thread_count(0, kDefaultLoadThreadCap));
  shard.file = std::move(file);
  shard.layout = std::move(layout);
}

std::vector<MappedShard> map_needed_shards(const DatasetState& state, ShardMapping::Access access) {
  std::vector<MappedShard> mapped = needed_shard_slots(state);
  if (state.table->remote) {  // a remote dataset: the needed shards into the cache folder first
    std::vector<std::size_t> needed;
    for (const MappedShard& slot : mapped) needed.push_back(slot.table_index);
    state.table->remote->fetch_shards(needed);
  }
  SegmentIds segment_ids;
  for (MappedShard& shard : mapped) map_shard(state, shard, access, segment_ids);
  return mapped;
}

}  // namespace detail
}  // namespace gpucache::runtime
