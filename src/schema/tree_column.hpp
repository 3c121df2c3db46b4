// Where a mapped column's rows lie in an input's value tree: one tensor holding every row, a
// tensor per row, a string per row, or (sequences built from lists of numbers) values gathered
// into one buffer. The row access of the InputColumn that schema mapping hands out reads from
// here: the hot path of pack.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "gpucache/input_column.hpp"
#include "gpucache/value.hpp"

namespace gpucache::detail {

struct TreeColumn {
  std::uint64_t row_elements = 0;  // tensor columns: values per row
  // Exactly one of these holds the rows. A matrix is [rows, ...], possibly strided or big-endian;
  // row tensors hold a row each (of one shape for tensors, 1-D of any length for sequences).
  std::shared_ptr<const Tensor> matrix;
  std::vector<const Tensor*> row_tensors;
  std::vector<std::string_view> row_texts;
  // Sequences gathered from lists of numbers: row r is values[offsets[r], offsets[r + 1]).
  std::vector<std::byte> sequence_values;
  std::vector<std::uint64_t> sequence_offsets;
  Value keep_alive;  // the tree the pointers above point into
};

// Gives `column` its row access (read_rows and the optional fast paths, text_row, or
// row_length and read_sequence) over `tree`, which the functions keep alive.
void wire_row_access(InputColumn& column, std::shared_ptr<const TreeColumn> tree);

}  // namespace gpucache::detail
