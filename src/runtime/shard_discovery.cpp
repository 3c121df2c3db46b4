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
#include "gpucache/shard/dataset_files.hpp"

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

// Why a directory without manifest.json cannot be opened.
Error no_manifest(const std::string& path) {
  std::error_code error;
  for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error))
    if (shard::shard_file_index(it->path().filename().string()))
      return Error(path, shard::kManifestName,
                   "missing: the dataset is unfinished (gpucache pack writes the manifest last)");
  if (error) return Error(path, "", "cannot list the directory: " + error.message());
  return Error(path, "", "no shard-*.gcs files: not a gpucache dataset");
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
  const std::string manifest_path = (fs::path(path) / shard::kManifestName).string();
  if (!fs::exists(manifest_path, error)) throw no_manifest(path);
  const shard::Manifest manifest = shard::open_manifest(path, shard::ManifestHashCheck::required,
                                                        "manifest.json was edited or corrupted")
                                       .manifest;
  if (manifest.shards.empty()) throw Error(manifest_path, "shards", "the dataset has no shards");

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
    if (entry.first_row != next_row)
      throw Error(manifest_path, "shards[" + std::to_string(k) + "]",
                  "first_row does not follow the previous shard");
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
  if (next_row != manifest.rows)
    throw Error(manifest_path, "rows", "total rows do not match the shards listed");
  table->total_rows = next_row;
  return table;
}

}  // namespace gpucache::runtime::detail
