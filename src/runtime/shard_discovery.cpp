// Dataset::open. A dataset directory is opened from its manifest alone (SPEC.md, "Opening a
// slice"): the manifest's shard list says which shard holds which rows and what each shard's
// header must be, so opening costs one file read however many shards there are, and a load maps
// and checks only the shards its rows lie in (map_needed_shards). A single shard file is opened
// by its header.
#include <algorithm>
#include <filesystem>
#include <system_error>

#include "dataset_state.hpp"
#include "gpucache/remote/remote.hpp"
#include "gpucache/shard/dataset_check.hpp"
#include "gpucache/shard/dataset_open.hpp"

namespace gpucache::runtime::detail {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<ShardTable> open_single_shard(const std::string& path) {
  auto table = std::make_shared<ShardTable>();
  table->path = path;
  table->local_path = path;
  const auto file = ShardMapping::open(path, ShardMapping::Access::read_only);
  const shard::Layout layout = shard::decode_layout({file->data(), file->size()}, path);
  // A single shard is a dataset of its own: its rows are numbered from 0 here.
  ShardInfo info{path,
                 layout.header.shard_index,
                 layout.header.first_row,
                 layout.header.row_count,
                 layout.header.file_size,
                 layout.header.header_hash};
  shard::ShardPlace place;
  place.index = layout.header.shard_index;
  place.first_row = layout.header.first_row;
  place.rows = layout.header.row_count;
  place.shard_count = layout.header.shard_count;
  place.dataset_rows = layout.header.dataset_rows;
  place.header_hash = layout.header.header_hash;
  table->shards.push_back(std::move(info));
  table->places.push_back(place);
  table->segment_of.push_back(0);
  table->starts.push_back(0);
  for (const auto& entry : layout.columns) table->columns.push_back(entry);
  table->total_rows = layout.header.row_count;
  return table;
}

}  // namespace

std::shared_ptr<const ShardTable> open_shard_table(const std::string& path,
                                                   const OpenOptions& options) {
  // A remote dataset: its manifest is fetched into the cache folder, which is then read as a
  // local dataset folder whose shards arrive when a load needs them (map_needed_shards).
  if (remote::is_remote_path(path)) {
    auto remote = remote::RemoteDataset::open(path, {options.cache_dir, options.cache_limit_bytes});
    auto local = open_shard_table(remote->local_dir());
    auto table = std::make_shared<ShardTable>(*local);
    table->path = remote->url();
    table->remote = std::move(remote);
    return table;
  }
  std::error_code error;
  const auto status = fs::status(path, error);
  if (error || !fs::exists(status))
    throw Error(path, "", "no such dataset directory or shard file");
  if (!fs::is_directory(status)) return open_single_shard(path);
  // The manifest alone (its hash, its rows adding up, at least one shard): each shard is checked
  // against it when a load maps it (map_shard), or fetches it (a remote dataset).
  const shard::Manifest manifest =
      *shard::open_dataset(path, shard::OpenMode::manifest_only).manifest;

  auto table = std::make_shared<ShardTable>();
  table->path = path;
  table->local_path = path;
  table->columns = manifest.columns;
  table->shards.reserve(manifest.shards.size());
  table->places.reserve(manifest.shards.size());
  std::uint64_t next_row = 0;
  std::uint32_t segment = 0;
  for (std::size_t k = 0; k < manifest.shards.size(); ++k) {
    const auto& entry = manifest.shards[k];
    table->shards.push_back({(fs::path(path) / entry.file).string(), static_cast<std::uint32_t>(k),
                             entry.first_row, entry.rows, entry.bytes, entry.header_hash});
    table->places.push_back(shard::manifest_place(manifest, k));
    while (segment + 1 < manifest.segments.size() &&
           k >= manifest.segments[segment + 1].first_shard)
      ++segment;
    table->segment_of.push_back(segment);
    table->starts.push_back(next_row);
    next_row += entry.rows;
  }
  table->total_rows = next_row;
  return table;
}

}  // namespace gpucache::runtime::detail
