// Dataset::open: finds the shard files, decodes and checks each one's layout, and checks that they
// form one dataset and agree with manifest.json (the shard module's dataset rules) before
// anything is loaded.
#include <algorithm>
#include <filesystem>
#include <system_error>

#include "dataset_state.hpp"
#include "gpucache/shard/dataset_check.hpp"
#include "gpucache/shard/dataset_files.hpp"

namespace gpucache::runtime::detail {
namespace {

namespace fs = std::filesystem;

void add_shard(ShardTable& table, const std::string& path) {
  const auto file = ShardMapping::open(path, ShardMapping::Access::read_only);
  shard::Layout layout = shard::decode_layout({file->data(), file->size()}, path);
  if (layout.header.compressed())
    throw Error(path, "header byte 16",
                "the shard is compressed (packed with --compress); the runtime reader maps shards "
                "and uploads them without a copy, which compressed chunks prevent: repack without "
                "--compress");
  ShardInfo info;
  info.path = path;
  info.shard_index = layout.header.shard_index;
  info.first_row = layout.header.first_row;
  info.rows = layout.header.row_count;
  info.file_size = layout.header.file_size;
  info.header_hash = layout.header.header_hash;
  table.shards.push_back(std::move(info));
  table.layouts.push_back(std::move(layout));
}

void take_columns_and_rows(ShardTable& table) {
  for (const auto& entry : table.layouts.front().columns) table.columns.push_back(entry);
  std::uint64_t next_row = 0;
  for (const auto& info : table.shards) {
    table.starts.push_back(next_row);
    next_row += info.rows;
  }
  table.total_rows = next_row;
}

// The manifest vouches for every shard (its header hash covers all of the shard's bytes), so a
// shard replaced after packing, or one added or removed, is refused here for every user of the
// runtime: C, C++ and Python.
shard::Manifest read_checked_manifest(const std::string& path) {
  const std::string manifest_path = (fs::path(path) / shard::kManifestName).string();
  bool hash_ok = false;
  shard::Manifest manifest = shard::read_manifest(manifest_path, hash_ok);
  if (!hash_ok)
    throw Error(manifest_path, "manifest_hash",
                "does not match the manifest's content: manifest.json was edited or corrupted");
  return manifest;
}

void check_against_manifest(const shard::Manifest& manifest,
                            std::span<const shard::FoundShard> found,
                            std::vector<shard::DatasetProblem>& problems) {
  std::vector<std::string> names;
  for (const auto& shard : found) names.push_back(shard.file);
  shard::check_manifest_listing(manifest, names, problems);
  for (const auto& shard : found)
    for (std::size_t i = 0; i < manifest.shards.size(); ++i)
      if (manifest.shards[i].file == shard.file)
        shard::check_shard_against_manifest(shard, manifest, i, problems);
}

}  // namespace

std::shared_ptr<const ShardTable> open_shard_table(const std::string& path) {
  auto table = std::make_shared<ShardTable>();
  table->path = path;
  std::error_code error;
  const auto status = fs::status(path, error);
  if (error || !fs::exists(status))
    throw Error(path, "", "no such dataset directory or shard file");
  if (!fs::is_directory(status)) {
    // A single shard is a dataset of its own: its rows are numbered from 0 here.
    add_shard(*table, path);
    take_columns_and_rows(*table);
    return table;
  }
  std::vector<std::pair<std::uint32_t, std::string>> found;
  // The error_code overloads: a directory that vanishes or cannot be read must not throw
  // std::filesystem_error past the runtime's API.
  for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (const auto number = shard::shard_file_index(name)) found.emplace_back(*number, name);
  }
  if (error) throw Error(path, "", "cannot list the directory: " + error.message());
  if (found.empty()) throw Error(path, "", "no shard-*.gcs files: not a gpucache dataset");
  if (!fs::exists(fs::path(path) / shard::kManifestName))
    throw Error(path, shard::kManifestName,
                "missing: the dataset is unfinished (gpucache pack writes the manifest last)");
  std::sort(found.begin(), found.end());
  const shard::Manifest manifest = read_checked_manifest(path);
  // A merged or appended dataset is made of segments whose headers number their shards from 0
  // (SPEC.md, "Segments"): only the manifest can place them, and it does for every shard.
  const bool segmented = !manifest.segments.empty();
  std::vector<shard::FoundShard> shards;
  for (const auto& [number, name] : found) {
    const std::string shard_path = (fs::path(path) / name).string();
    add_shard(*table, shard_path);
    if (segmented) table->shards.back().shard_index = number;
    if (!segmented && table->shards.back().shard_index != number)
      throw Error(shard_path, "header byte 40",
                  "the file name says shard " + std::to_string(number) + " but the header says " +
                      std::to_string(table->shards.back().shard_index) +
                      ": shards were renamed or mixed");
  }
  for (std::size_t k = 0; k < found.size(); ++k)
    shards.push_back({found[k].second, &table->layouts[k]});
  std::vector<shard::DatasetProblem> problems;
  if (!segmented) shard::check_shard_set(shards, path, problems);
  shard::throw_first(problems, path);
  check_against_manifest(manifest, shards, problems);
  shard::throw_first(problems, path);
  if (segmented)  // the listing check above has matched names and entries one to one
    for (std::size_t k = 0; k < table->shards.size(); ++k)
      table->shards[k].first_row = manifest.shards[k].first_row;
  take_columns_and_rows(*table);
  return table;
}

}  // namespace gpucache::runtime::detail
