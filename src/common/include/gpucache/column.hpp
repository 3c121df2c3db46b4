// The one description of a dataset column, wherever a column is seen: an input being mapped, a
// shard's column table, manifest.json, a loaded dataset. Where bytes lie is added beside it by
// whoever places them (shard::ColumnEntry); how rows are read, by whoever reads them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpucache/api.hpp"
#include "gpucache/dtype.hpp"

namespace gpucache {

// The kinds of column the shard format stores. The numeric codes are part of the format
// (src/shard/SPEC.md, "Column table").
enum class ColumnKind : std::uint8_t {
  tensor = 0,    // every row has the same shape: the column is [rows, *row_shape]
  text = 1,      // one UTF-8 string per row
  sequence = 2,  // one 1-D run of values per row, of any length (token ids): format 1.2
};

// The most dimensions a row may have (a tensor column is then [rows, d0, ..., d7]).
inline constexpr std::size_t kMaxRowDims = 8;

// "tensor", "text", "sequence".
GPUCACHE_API std::string_view column_kind_name(ColumnKind kind) noexcept;
GPUCACHE_API std::optional<ColumnKind> parse_column_kind(std::string_view name) noexcept;

// What a column is for, which decides how pack stores and checks it (docs/cli.md, "Column
// roles"). Not a storage property: the manifest records it, the shards do not need it.
enum class ColumnRole : std::uint8_t {
  embedding,  // float [D] rows: padded to the tensor-core pitch, finite, norm range, non-zero
  tensor,     // any dtype and row shape, stored densely: float rows checked finite
  sequence,   // a run of values of its own length per row (token ids)
  text,       // a UTF-8 string per row
};
// "embedding", "tensor", "sequence", "text".
GPUCACHE_API std::string_view column_role_name(ColumnRole role) noexcept;
GPUCACHE_API std::optional<ColumnRole> parse_column_role(std::string_view name) noexcept;

// Dates and times are stored as int64 tensor columns; what the integers mean is recorded beside
// the column in manifest.json ("time": {"kind", "unit", "tz"}; src/shard/SPEC.md), never in the
// shards, which hold plain i64. One table (column.cpp) names the kinds and units.
enum class TimeKind : std::uint8_t {
  timestamp,  // an instant (tz set: UTC-normalised) or a wall-clock time (tz empty) since 1970
  date,       // a calendar day since 1970-01-01
  time,       // a time of day since midnight
  duration,   // an elapsed time
};
enum class TimeUnit : std::uint8_t { s, ms, us, ns, D };  // D: days (dates)

struct GPUCACHE_API ColumnTime {
  TimeKind kind = TimeKind::timestamp;
  TimeUnit unit = TimeUnit::ns;
  // Timestamps only: the time zone the values were recorded in ("UTC", or an IANA name such as
  // "Europe/Berlin" from an Arrow or pandas column); the integers are then instants since the
  // UTC epoch. Empty: a naive timestamp (no time zone), and for every other kind.
  std::string tz;
  bool operator==(const ColumnTime&) const = default;
};

// "timestamp", "date", "time", "duration"; "s", "ms", "us", "ns", "D".
GPUCACHE_API std::string_view time_kind_name(TimeKind kind) noexcept;
GPUCACHE_API std::optional<TimeKind> parse_time_kind(std::string_view name) noexcept;
GPUCACHE_API std::string_view time_unit_name(TimeUnit unit) noexcept;
GPUCACHE_API std::optional<TimeUnit> parse_time_unit(std::string_view name) noexcept;
// Whether a kind may carry a unit (dates: D, s or ms as Arrow's date64 is; the others: s to ns)
// and a time zone (timestamps only). Readers of the manifest and of Python's metadata check it.
GPUCACHE_API bool time_is_valid(const ColumnTime& time) noexcept;
// "timestamp[us, UTC]", "date[D]", "duration[ns]": for probe, pack's summary and messages.
GPUCACHE_API std::string describe_time(const ColumnTime& time);

struct GPUCACHE_API Column {
  std::string name;
  ColumnKind kind = ColumnKind::tensor;
  DType dtype = DType::f32;  // element type; u8 (UTF-8 bytes) for text
  // Tensor columns: the shape of one row: {} for one value per row, {384} for a vector,
  // {3, 224, 224} for an image. Empty for text and sequences, whose rows vary in length.
  std::vector<std::uint64_t> row_shape;
  // Elements stored for the innermost dimension: dim(), or more when rows are padded with zeros
  // (embedding rows are padded to a tensor-core friendly pitch). 1 for text, 0 for sequences.
  std::uint64_t padded_dim = 1;

  // The innermost logical dimension; 1 for scalar rows and text, 0 (varying) for sequences.
  std::uint64_t dim() const noexcept;
  // The rank of the whole column: 1 + the row's dimensions ([rows, *row_shape]); a sequence column
  // is [rows, varying], rank 2.
  std::uint8_t rank() const noexcept;
  // Text and sequences: offsets and values instead of rows of one size.
  bool variable_length() const noexcept { return kind != ColumnKind::tensor; }
  // Logical elements in one row: the product of row_shape (1 for scalar rows and text).
  std::uint64_t row_elements() const noexcept;
  // Elements stored per row: the outer dimensions times padded_dim.
  std::uint64_t stored_row_elements() const noexcept;
  // Bytes from one stored row to the next. Shapes read from files must have been checked with
  // checked arithmetic (the shard decoder does) before this is trusted not to overflow.
  std::uint64_t row_pitch_bytes() const noexcept {
    return stored_row_elements() * dtype_size(dtype);
  }
  bool padded() const noexcept { return padded_dim != dim(); }

  bool operator==(const Column&) const = default;
};

// "'embedding' tensor f16 [384] padded to 400", "'tokens' sequence i32": for messages that
// compare columns.
GPUCACHE_API std::string describe_column(const Column& column);

}  // namespace gpucache
