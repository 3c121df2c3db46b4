// One opened input of `gpucache pack`, seen as columns of rows: what pack needs from any reader,
// whatever the file format and layout.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpucache/shard/shard_layout.hpp"
#include "gpucache/schema.hpp"
#include "gpucache/value.hpp"

namespace gpucache::detail {

struct SourceColumn {
  std::string name;
  shard::ColumnKind kind = shard::ColumnKind::tensor;
  DType dtype = DType::f32;  // source element type (tensor columns)
  std::uint8_t rank = 2;
  std::uint64_t dim = 1;
  // Tensor columns: copies rows [first, first + count) into out, row-major, `dim` elements of
  // `dtype` per row.
  std::function<void(std::uint64_t first, std::uint64_t count, std::span<std::byte> out)> read_rows;
  // Tensor columns, optional: lets the rows' input pages leave the resident set once read.
  std::function<void(std::uint64_t first, std::uint64_t count)> release_rows;
  // Tensor columns, optional: rows [first, first + count) where they lie in the input, row-major,
  // little-endian `dtype`, when the input stores them so (a contiguous matrix in a mapped file);
  // readers then convert straight from the mapping instead of copying rows out first.
  std::function<const std::byte*(std::uint64_t first, std::uint64_t count)> direct_rows;
  // Tensor columns, optional: where each of rows [first, first + count) lies in memory as `dim`
  // little-endian `dtype` values (a tensor per row), written to out; false when one does not.
  std::function<bool(std::uint64_t first, std::uint64_t count, const std::byte** out)> row_pointers;
  // Text columns: the UTF-8 text of one row.
  std::function<std::string_view(std::uint64_t row)> text_row;
};

struct Source {
  std::string path;
  std::uint64_t rows = 0;
  std::vector<SourceColumn> columns;
  Value root;  // keeps the parsed input (and its memory map) alive
  std::shared_ptr<const SourceMapping> mapping;
};

struct SourceOptions {
  std::optional<SourceKind> kind;  // --kind; detected when unset
  std::vector<FieldSpec> fields;   // --field COLUMN=PATH
  unsigned threads = 0;            // --threads: what the reader may use (ReadOptions)
};

// Reads any supported input (.pt, .safetensors, .npy, .npz, .jsonl) and maps it to columns
// (schema.hpp).
Source open_source(const std::string& path, const SourceOptions& options);

}  // namespace gpucache::detail
