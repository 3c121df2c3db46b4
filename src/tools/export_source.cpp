#include "export_source.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/shard/chunks.hpp"
#include "gpucache/shard/dataset_check.hpp"
#include "gpucache/shard/dataset_open.hpp"

namespace gpucache::detail {
namespace {

namespace fs = std::filesystem;

// Pieces handed on at once: pwritev takes up to IOV_MAX (1024 on Linux) in one call.
constexpr std::size_t kPieceBatch = 1024;
// Offsets converted per block: 512 KiB of int64.
constexpr std::uint64_t kOffsetBlock = 64 * 1024;

shard::Layout read_layout(const std::string& path) {
  const auto file = MappedFile::open(path);
  return shard::decode_layout(file->bytes(), path);
}

std::string names_of(const std::vector<shard::ColumnEntry>& columns) {
  std::string names;
  for (const auto& column : columns) names += (names.empty() ? "" : ", ") + column.name;
  return names;
}

}  // namespace

ExportSource::ExportSource(std::string dataset, const std::vector<std::string>& wanted,
                           unsigned threads)
    : path_(std::move(dataset)), threads_(threads) {
  std::error_code error;
  if (fs::is_directory(path_, error)) {
    // Strict: every listed shard at its size, no unlisted shard file, no leftover temporary.
    auto opened = shard::open_dataset(path_, shard::OpenMode::strict);
    const auto& manifest = *opened.manifest;
    manifest_hash_ = std::move(opened.recorded_hash);
    tool_version_ = manifest.tool_version;
    times_ = manifest.times;

    std::vector<shard::DatasetProblem> problems;
    for (const auto& listed : manifest.shards) {
      shard_paths_.push_back((fs::path(path_) / listed.file).string());
      layouts_.push_back(read_layout(shard_paths_.back()));
    }
    std::vector<shard::FoundShard> found;
    for (std::size_t k = 0; k < layouts_.size(); ++k) {
      found.push_back({manifest.shards[k].file, &layouts_[k]});
      shard::check_shard_against_manifest(found.back(), manifest, k, problems);
    }
    // Segments (merged or appended datasets) are placed by the manifest alone (SPEC.md).
    if (manifest.segments.empty()) shard::check_shard_set(found, path_, problems);
    shard::throw_first(problems, path_);
  } else {
    shard_paths_.push_back(path_);
    layouts_.push_back(read_layout(path_));
  }

  const auto& table = layouts_.front().columns;
  for (const auto& name : wanted)
    if (std::none_of(table.begin(), table.end(),
                     [&](const shard::ColumnEntry& column) { return column.name == name; }))
      throw Error(path_, "", "no column named '" + name + "' (columns: " + names_of(table) + ")");
  for (std::size_t c = 0; c < table.size(); ++c) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), table[c].name) == wanted.end())
      continue;
    ExportColumn chosen{c, static_cast<const Column&>(table[c]), 0, std::nullopt};
    if (c < times_.size()) chosen.time = times_[c];
    for (const auto& layout : layouts_) {
      if (!table[c].variable_length()) break;
      const auto total = checked_add(chosen.values, shard::offset_limit(layout.columns[c]));
      // Offsets are written as int64, so the dataset's values must stay below 2^63.
      if (!total || *total > std::uint64_t{std::numeric_limits<std::int64_t>::max()})
        throw Error(path_, "column '" + table[c].name + "'", "holds 2^63 values or more");
      chosen.values = *total;
    }
    columns_.push_back(std::move(chosen));
  }
  for (const auto& layout : layouts_) rows_ += layout.header.row_count;
}

std::string ExportSource::name() const {
  std::error_code error;
  const fs::path path(path_);
  if (fs::is_directory(path, error)) {
    const auto absolute = fs::weakly_canonical(path, error);
    const auto name = (error ? path : absolute).filename().string();
    return name.empty() || name == "." || name == ".." ? "dataset" : name;
  }
  return path.stem().string();
}

void ExportSource::for_each_shard(
    const std::function<void(const shard::ShardReader&)>& visit) const {
  for (std::size_t k = 0; k < shard_paths_.size(); ++k) {
    const shard::ShardReader reader(shard_paths_[k], true, threads_);
    if (reader.layout().header.header_hash != layouts_[k].header.header_hash)
      throw Error(shard_paths_[k], "header", "changed while the dataset was being exported");
    for (const auto& chosen : columns_) {
      const auto& entry = reader.layout().columns[chosen.index];
      if (!entry.variable_length()) continue;
      const auto offsets = reader.tensor_data(chosen.index);
      if (const auto bad = shard::find_bad_offset(offsets.data(), reader.rows(),
                                                  shard::offset_limit(entry), true))
        throw shard::bad_offset_error(shard_paths_[k], entry, 0, *bad,
                                      entry.data_offset + *bad * 8);
    }
    visit(reader);
  }
}

void tensor_pieces(const shard::ShardReader& shard, std::size_t column, const PieceSink& sink) {
  const auto& entry = shard.layout().columns[column];
  const auto data = shard.tensor_data(column);
  if (data.empty()) return;
  if (!entry.padded()) {
    const std::span<const std::byte> whole = data;
    sink({&whole, 1});
    return;
  }
  const std::uint64_t size = dtype_size(entry.dtype);
  const std::uint64_t run = entry.dim() * size;
  const std::uint64_t stride = entry.padded_dim * size;
  if (run == 0) return;
  std::vector<std::span<const std::byte>> batch;
  batch.reserve(kPieceBatch);
  for (std::uint64_t at = 0; at < data.size(); at += stride) {
    batch.push_back(data.subspan(at, run));
    if (batch.size() == kPieceBatch) {
      sink(batch);
      batch.clear();
    }
  }
  if (!batch.empty()) sink(batch);
}

void value_pieces(const shard::ShardReader& shard, std::size_t column, const PieceSink& sink) {
  std::vector<std::span<const std::byte>> batch;
  batch.reserve(kPieceBatch);
  auto flush = [&] {
    if (!batch.empty()) sink(batch);
    batch.clear();
  };
  for (std::uint64_t r = 0; r < shard.rows(); ++r) {
    const auto row = shard.values(column, r);
    if (row.empty()) continue;
    if (!batch.empty() && batch.back().data() + batch.back().size() == row.data()) {
      batch.back() = {batch.back().data(), batch.back().size() + row.size()};
      continue;
    }
    if (batch.size() == kPieceBatch) flush();
    batch.push_back(row);
  }
  flush();
}

void rebased_offsets(const shard::ShardReader& shard, std::size_t column, std::uint64_t base,
                     const std::function<void(std::span<const std::byte>)>& sink) {
  const auto offsets = shard.tensor_data(column);
  std::vector<std::int64_t> block;
  for (std::uint64_t first = 1; first <= shard.rows(); first += kOffsetBlock) {
    const std::uint64_t count = std::min(kOffsetBlock, shard.rows() + 1 - first);
    block.resize(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      std::uint64_t offset = 0;
      std::memcpy(&offset, offsets.data() + (first + i) * 8, 8);
      // ExportSource checked that the dataset's values, and so base + offset, fit in int64.
      block[i] = static_cast<std::int64_t>(base + offset);
    }
    sink(std::as_bytes(std::span(block)));
  }
}

void FileCursor::write(std::span<const std::byte> bytes) {
  file_->write_at(offset_, bytes);
  offset_ += bytes.size();
}

void FileCursor::write(Pieces pieces) {
  file_->write_pieces_at(offset_, pieces);
  for (const auto& piece : pieces) offset_ += piece.size();
}

}  // namespace gpucache::detail
