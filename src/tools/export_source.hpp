// The reading side of `gpucache export`, shared by its npy and safetensors writers: the dataset
// checked as a whole before anything is written, then its shards one at a time, and a shard's
// column bytes as the pieces an output file wants (padding left out, offsets rebased).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpucache/column.hpp"
#include "gpucache/common/atomic_file.hpp"
#include "gpucache/shard/shard_layout.hpp"
#include "gpucache/shard_io/shard_reader.hpp"

namespace gpucache::detail {

// A column chosen for export, as every shard of the dataset describes it.
struct ExportColumn {
  std::size_t index = 0;  // in each shard's column table
  Column column;
  // Text and sequences: the values of the whole dataset (UTF-8 bytes for text).
  std::uint64_t values = 0;
  // Dates and times: what the column's i64 values mean (the manifest's "time"); npy writes them
  // as datetime64/timedelta64.
  std::optional<ColumnTime> time;
};

class ExportSource {
 public:
  // Opens a dataset directory (manifest.json and its shards) or a single shard file and checks
  // what can be checked without reading data: the manifest's hash, each shard's layout, and the
  // shards against the manifest and each other (as verify does). `wanted` names the columns to
  // export (empty: all, in table order); an unknown name is an error listing those that exist.
  ExportSource(std::string dataset, const std::vector<std::string>& wanted, unsigned threads);

  const std::string& path() const noexcept { return path_; }
  // The dataset's name: its directory's, or the shard file's stem.
  std::string name() const;
  std::uint64_t rows() const noexcept { return rows_; }
  const std::vector<ExportColumn>& columns() const noexcept { return columns_; }
  // manifest_hash from manifest.json; empty for a single shard file.
  const std::string& manifest_hash() const noexcept { return manifest_hash_; }
  const std::string& tool_version() const noexcept { return tool_version_; }

  // Opens the shards one after another, in row order, each checked as it opens: every chunk hash,
  // the header against the one checked before, and the offsets of the chosen text and sequence
  // columns. A shard is closed (a compressed one's decompressed copy freed) before the next opens.
  void for_each_shard(const std::function<void(const shard::ShardReader&)>& visit) const;

 private:
  std::string path_;
  unsigned threads_ = 0;
  std::vector<std::string> shard_paths_;
  std::vector<shard::Layout> layouts_;
  std::vector<ExportColumn> columns_;
  std::vector<std::optional<ColumnTime>> times_;  // the manifest's, by column index
  std::uint64_t rows_ = 0;
  std::string manifest_hash_;
  std::string tool_version_;
};

// Byte ranges of a shard, in the order an output file holds them.
using Pieces = std::span<const std::span<const std::byte>>;
using PieceSink = std::function<void(Pieces)>;

// A tensor column's logical bytes in `shard`, rows in order with the padding left out: the whole
// region as one piece when the column is not padded, one piece per innermost run otherwise,
// handed to `sink` in batches.
void tensor_pieces(const shard::ShardReader& shard, std::size_t column, const PieceSink& sink);
// A text or sequence column's values in `shard`, in row order (adjacent rows as one piece).
void value_pieces(const shard::ShardReader& shard, std::size_t column, const PieceSink& sink);
// A text or sequence column's offsets in `shard` for rows 1..rows (row 0's is the previous
// shard's last) plus `base`, the values before this shard, as little-endian int64, in blocks.
void rebased_offsets(const shard::ShardReader& shard, std::size_t column, std::uint64_t base,
                     const std::function<void(std::span<const std::byte>)>& sink);

// Writes through an AtomicFile at a moving offset, so several arrays can fill one file.
class FileCursor {
 public:
  FileCursor(AtomicFile& file, std::uint64_t offset) : file_(&file), offset_(offset) {}
  void write(std::span<const std::byte> bytes);
  void write(Pieces pieces);
  std::uint64_t offset() const noexcept { return offset_; }

 private:
  AtomicFile* file_;
  std::uint64_t offset_;
};

}  // namespace gpucache::detail
