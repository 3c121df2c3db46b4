// Columns that live in the caller's memory (arrays, tensors and lists handed to gpucache.pack in
// Python): read where they lie, never copied before validation, by the same InputColumn contract
// as a file's columns. src/inputs/memory/FORMAT.md describes the forms accepted and the checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpucache/column.hpp"
#include "gpucache/readers.hpp"

namespace gpucache {

// One column in memory. The memory must stay unchanged until pack returns.
struct MemoryColumn {
  std::string name;  // the column's path; map_input names it so unless --field renames it
  ColumnKind kind = ColumnKind::tensor;
  // tensor: the element type of `values`; sequence: of its values; text: u8 (UTF-8 bytes).
  DType dtype = DType::f32;
  std::uint64_t rows = 0;
  std::vector<std::uint64_t> row_shape;  // tensor columns: the shape of one row ({} for scalars)
  // tensor: rows × row_elements values, row-major, C-contiguous; sequence and text: every row's
  // values concatenated. Little-endian.
  std::span<const std::byte> values;
  // sequence and text: rows + 1 int64 offsets into values (in elements), starting at 0,
  // non-decreasing, the last one the number of values (Arrow's layout).
  std::span<const std::int64_t> offsets;
  // Tensor columns, optional: the same values (same layout) in CUDA device memory on device
  // `device_ordinal`, e.g. a CUDA tensor whose host copy is `values`. Only the CUDA validation
  // backend reads it, and only when it runs on that device: it then checks rows there instead of
  // uploading them from `values`. Everything else (CPU checks, conversion, writing, provenance)
  // reads `values`, so the output is the same with or without it. Must stay valid and unchanged,
  // with no GPU work pending on it, until pack returns.
  const void* device_values = nullptr;
  int device_ordinal = -1;
  // Dates and times (numpy datetime64/timedelta64, Arrow timestamps...): an i64 tensor column
  // whose integers mean this (recorded in the manifest). Set on any other column: refused.
  std::optional<ColumnTime> time;
  // Rows that hold a null (a NaT, an Arrow null in any column), ascending and unique; their
  // values are placeholders (0, or an empty row). Pack drops them with the reason `null` (or
  // refuses them: --on-null error).
  std::vector<std::uint64_t> null_rows;
};

// The columns as an array reader hands them over (InputData::columns), origin "memory". Checks
// each column's sizes and offsets, and that text is valid UTF-8; throws gpucache::Error naming
// "memory:NAME" and what is wrong.
InputData memory_input(const std::vector<MemoryColumn>& columns);

// The provenance of a column in memory, as the manifest lists a file: "memory:NAME", its bytes
// (values, plus offsets for sequences and text) and the XXH3-64 of them (values, then offsets).
struct MemoryProvenance {
  std::string path;
  std::uint64_t bytes = 0;
  std::uint64_t xxh3 = 0;
};
MemoryProvenance memory_provenance(const MemoryColumn& column);

// The provenance of an object tree in memory (gpucache.pack of a list of dicts, or of a
// {text: vector} dict, read as the .pt reader's tree of the same objects would be): "memory", the
// bytes of its tensors and strings, and the XXH3-64 of a walk that spells each value's type, each
// dict key, string and number, and each tensor's dtype, shape and bytes, so two trees that differ
// anywhere differ in hash.
MemoryProvenance memory_tree_provenance(const Value& tree);

}  // namespace gpucache
