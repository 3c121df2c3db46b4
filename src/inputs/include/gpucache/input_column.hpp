// One column of an input, read row by row whatever the input's format: what schema mapping makes
// of a value tree (src/schema), and what an array reader can hand over directly. Pack reads every
// input through this and nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpucache/column.hpp"

namespace gpucache {

// The description (Column) is the column as the input holds it: the input's dtype and row shape,
// unpadded (padded_dim == dim()).
struct InputColumn : Column {
  std::uint64_t rows = 0;
  // What the column is for, as far as the input tells (schema mapping decides embedding columns
  // and --role overrides): tensor, sequence or text by kind.
  ColumnRole role = ColumnRole::tensor;
  std::string path;    // where in the input it comes from, as --field accepts it
  std::string origin;  // the input, for messages
  // Dates and times (an i64 tensor column): what the integers mean, recorded in the manifest.
  std::optional<ColumnTime> time;
  // How the reader changed the values on the way, when it did: "decimal(10,2) stored as f64".
  // Probe shows it; pack reports it (--json `input_conversions`, the manifest's section).
  std::string conversion;

  // Tensor columns: copies rows [first, first + count) into out, row-major and little-endian,
  // row_elements() values of dtype per row. Callers check the range and size
  // (read_rows_as does).
  std::function<void(std::uint64_t first, std::uint64_t count, std::span<std::byte> out)> read_rows;
  // Tensor columns, optional: rows [first, first + count) where they lie (a contiguous
  // little-endian matrix in a mapped file), or nullptr when they do not lie so.
  std::function<const std::byte*(std::uint64_t first, std::uint64_t count)> direct_rows;
  // Tensor columns, optional: where each of rows [first, first + count) lies as little-endian
  // values of dtype (a tensor per row), written to out; false when one does not.
  std::function<bool(std::uint64_t first, std::uint64_t count, const std::byte** out)> row_pointers;
  // Tensor columns, optional: the same rows as direct_rows, laid out the same, in CUDA device
  // memory on device `device_ordinal` (a CUDA tensor handed over from Python). Read only by the
  // CUDA validation backend on that device; never dereferenced on the host.
  std::function<const std::byte*(std::uint64_t first, std::uint64_t count)> device_rows;
  int device_ordinal = -1;
  // Tensor columns, optional: lets the rows' input pages leave the resident set once read.
  std::function<void(std::uint64_t first, std::uint64_t count)> release_rows;
  // Text columns: the UTF-8 text of one row, valid while the column lives; except that a reader
  // that decodes part of its input again when read (Parquet, beyond its resident budget) keeps
  // only the last such part, so its text stays valid until the column reads a row of another
  // part, or a column of another Parquet file reads one of its own (the open files share their
  // memory: src/inputs/parquet/FORMAT.md). Use a row before reading the next one (pack does), or
  // copy it.
  std::function<std::string_view(std::uint64_t row)> text_row;
  // Sequence columns: how many values row `row` holds, and its values (little-endian dtype) copied
  // into out (row_length(row) × dtype size bytes).
  std::function<std::uint64_t(std::uint64_t row)> row_length;
  std::function<void(std::uint64_t row, std::span<std::byte> out)> read_sequence;
  // Rows that hold a null (no value) in this column, ascending and unique; empty when none. The
  // readers above still answer for these rows (zeros, empty text or an empty sequence) so that
  // a caller that does not look here reads placeholders, never garbage; pack drops such rows
  // with the reason `null` (or refuses them, by its --on-null option) when the column is packed.
  std::vector<std::uint64_t> null_rows;
};

// Rows [first, first + count) of a tensor column as out_dtype: the column's own dtype, or f32 for
// a float column (f16, bf16 and f64 are widened). Throws gpucache::Error naming the column for a
// text column, rows out of range, another out_dtype, or an `out` of the wrong size.
void read_rows_as(const InputColumn& column, std::uint64_t first, std::uint64_t count,
                  DType out_dtype, std::span<std::byte> out);
// Row `row` of a text column. Throws gpucache::Error when out of range or not a text column.
std::string_view read_text(const InputColumn& column, std::uint64_t row);

// For readers whose columns are named by paths in the file (an HDF5 dataset's, a Parquet field's):
// a valid column name ([a-z_][a-z0-9_]*, at most 255 bytes, what a shard stores) made from
// `path`: lower case, leading slashes dropped, every other character '_', '_' before a leading
// digit ("/Data/x 1" makes "data_x_1").
std::string column_name_from_path(std::string_view path);
// Renames the later of columns whose names collide ("a/b" and "a_b" both make "a_b"): "a_b_2",
// "a_b_3", ... in order.
void make_column_names_unique(std::vector<InputColumn>& columns);

}  // namespace gpucache
