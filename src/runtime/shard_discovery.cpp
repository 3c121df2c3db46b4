// Dataset::open: finds the shard files, decodes and checks each one's layout, and checks that they
// form one dataset (same columns, indices 0..n-1, rows contiguous) before anything is loaded.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "dataset_state.hpp"
#include "gpucache/shard/dataset_files.hpp"

namespace gpucache::runtime::detail {
namespace {

namespace fs = std::filesystem;

std::string describe(const Column& column) {
  std::string text = "'" + column.name + "' " + std::string(column_kind_name(column.kind)) + " " +
                     std::string(dtype_text(column.dtype));
  if (column.kind == ColumnKind::tensor)
    text += " rank " + std::to_string(column.rank) + " dim " + std::to_string(column.dim) +
            " padded " + std::to_string(column.padded_dim);
  return text;
}

bool same_shape(const Column& a, const Column& b) {
  return a.name == b.name && a.kind == b.kind && a.dtype == b.dtype && a.rank == b.rank &&
         a.dim == b.dim && a.padded_dim == b.padded_dim && a.row_pitch_bytes == b.row_pitch_bytes;
}

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

// Version 1.1 shards name their dataset (shard count, rows, the pack plan's hash), so a shard that
// is missing at the end, or one taken from another pack of the same shape, is caught here without
// manifest.json.
void check_same_dataset(const ShardTable& table) {
  const shard::Header& first = table.layouts.front().header;
  for (std::size_t k = 0; k < table.layouts.size(); ++k) {
    const shard::Header& header = table.layouts[k].header;
    const std::string& path = table.shards[k].path;
    if (header.has_dataset_fields() != first.has_dataset_fields() ||
        header.dataset_id != first.dataset_id)
      throw Error(path, "header byte 152",
                  "belongs to another dataset than " + table.shards.front().path +
                      " (its dataset id differs): shards from different packs were mixed");
    if (header.shard_count != first.shard_count || header.dataset_rows != first.dataset_rows)
      throw Error(
          path, "header byte 136",
          "disagrees with " + table.shards.front().path + " on the dataset's shard count or rows");
  }
  if (!first.has_dataset_fields()) return;  // a version 1.0 dataset: only the manifest can tell
  if (table.shards.size() != first.shard_count) {
    char missing[32];
    std::snprintf(missing, sizeof missing, "shard-%05zu.gcs", table.shards.size());
    throw Error(table.path, missing,
                "missing: the shards say the dataset has " + std::to_string(first.shard_count) +
                    " shards but " + std::to_string(table.shards.size()) + " are present");
  }
  if (table.total_rows != first.dataset_rows)
    throw Error(table.path, "",
                "the shards hold " + std::to_string(table.total_rows) +
                    " rows but their headers say the dataset has " +
                    std::to_string(first.dataset_rows));
}

void check_consistent(ShardTable& table) {
  const auto& first = table.layouts.front();
  for (const auto& entry : first.columns) table.columns.push_back(column_from_entry(entry));
  std::uint64_t next_row = 0;
  for (std::size_t k = 0; k < table.shards.size(); ++k) {
    const ShardInfo& info = table.shards[k];
    const auto& layout = table.layouts[k];
    if (info.shard_index != k) {
      const bool repeated = k > 0 && table.shards[k - 1].shard_index == info.shard_index;
      throw Error(info.path, "header byte 40",
                  repeated ? "shard index " + std::to_string(info.shard_index) +
                                 " appears twice (also in " + table.shards[k - 1].path + ")"
                           : "shard index " + std::to_string(k) +
                                 " is missing: the dataset is incomplete (this shard is index " +
                                 std::to_string(info.shard_index) + ")");
    }
    if (info.first_row != next_row)
      throw Error(info.path, "header byte 32",
                  "first_row is " + std::to_string(info.first_row) + " but the shards before it " +
                      "end at row " + std::to_string(next_row) + ": rows are missing or repeated");
    if (layout.columns.size() != table.columns.size())
      throw Error(info.path, "header byte 44",
                  "has " + std::to_string(layout.columns.size()) + " columns but " +
                      table.shards.front().path + " has " + std::to_string(table.columns.size()));
    for (std::size_t c = 0; c < layout.columns.size(); ++c) {
      const Column column = column_from_entry(layout.columns[c]);
      if (!same_shape(column, table.columns[c]))
        throw Error(info.path, "column table entry " + std::to_string(c),
                    "column " + describe(column) + " differs from " + describe(table.columns[c]) +
                        " in " + table.shards.front().path);
    }
    table.starts.push_back(next_row);
    next_row += info.rows;
  }
  table.total_rows = next_row;
  check_same_dataset(table);
}

}  // namespace

Column column_from_entry(const shard::ColumnEntry& entry) {
  Column column;
  column.name = entry.name;
  column.kind = static_cast<ColumnKind>(entry.kind);
  column.dtype = entry.dtype;
  column.rank = entry.rank;
  column.dim = entry.dim;
  column.padded_dim = entry.padded_dim;
  column.row_pitch_bytes = entry.row_pitch_bytes;
  return column;
}

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
    table->columns.clear();
    for (const auto& entry : table->layouts.front().columns)
      table->columns.push_back(column_from_entry(entry));
    table->starts = {0};
    table->total_rows = table->shards.front().rows;
    return table;
  }
  std::vector<std::pair<std::uint32_t, std::string>> found;
  // The error_code overloads: a directory that vanishes or cannot be read must not throw
  // std::filesystem_error past the runtime's API.
  for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (const auto number = shard::shard_file_index(name))
      found.emplace_back(*number, it->path().string());
  }
  if (error) throw Error(path, "", "cannot list the directory: " + error.message());
  if (found.empty()) throw Error(path, "", "no shard-*.gcs files: not a gpucache dataset");
  if (!fs::exists(fs::path(path) / shard::kManifestName))
    throw Error(path, "manifest.json",
                "missing: the dataset is unfinished (gpucache pack writes the manifest last)");
  std::sort(found.begin(), found.end());
  for (const auto& [number, shard_path] : found) {
    add_shard(*table, shard_path);
    if (table->shards.back().shard_index != number)
      throw Error(shard_path, "header byte 40",
                  "the file name says shard " + std::to_string(number) + " but the header says " +
                      std::to_string(table->shards.back().shard_index) +
                      ": shards were renamed or mixed");
  }
  check_consistent(*table);
  return table;
}

}  // namespace gpucache::runtime::detail
