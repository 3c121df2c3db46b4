// Row access of mapped columns: the hot path of pack. Dense little-endian tensors are read (or
// handed out in place) straight from the mapped bytes; strided or big-endian ones are reordered
// by Tensor::copy_row_major.
#include <cstring>

#include "gpucache/common/mapped_file.hpp"
#include "tree_column.hpp"

namespace gpucache::detail {
namespace {

// Rows [first, first + count) of a column stored as one contiguous little-endian matrix; empty
// when they are not all inside it.
std::span<const std::byte> matrix_rows(const TreeColumn& tree, std::size_t itemsize,
                                       std::uint64_t first, std::uint64_t count) {
  const std::uint64_t row_bytes = tree.row_elements * itemsize;
  const auto bytes = tree.matrix->contiguous_bytes();
  if (first + count < first || (first + count) * row_bytes > bytes.size()) return {};
  return bytes.subspan(first * row_bytes, count * row_bytes);
}

}  // namespace

void wire_row_access(InputColumn& column, std::shared_ptr<const TreeColumn> tree) {
  if (column.kind == ColumnKind::text) {
    column.text_row = [tree](std::uint64_t row) { return tree->row_texts[row]; };
    return;
  }
  const std::size_t itemsize = dtype_size(column.dtype);
  if (column.kind == ColumnKind::sequence) {
    column.row_length = [tree](std::uint64_t row) -> std::uint64_t {
      if (!tree->row_tensors.empty()) return tree->row_tensors[row]->numel();
      if (tree->matrix) return tree->row_elements;
      return tree->sequence_offsets[row + 1] - tree->sequence_offsets[row];
    };
    column.read_sequence = [tree, itemsize](std::uint64_t row, std::span<std::byte> out) {
      if (!tree->row_tensors.empty()) {
        tree->row_tensors[row]->copy_row_major(0, out);
      } else if (tree->matrix) {
        tree->matrix->copy_row_major(row * tree->row_elements, out);
      } else {
        std::memcpy(out.data(),
                    tree->sequence_values.data() + tree->sequence_offsets[row] * itemsize,
                    out.size());
      }
    };
    return;
  }
  const DType dtype = column.dtype;
  column.read_rows = [tree, itemsize](std::uint64_t first, std::uint64_t count,
                                      std::span<std::byte> out) {
    const std::uint64_t per_row = tree->row_elements;
    if (tree->matrix) {
      tree->matrix->copy_row_major(first * per_row, out.first(count * per_row * itemsize));
      return;
    }
    for (std::uint64_t row = 0; row < count; ++row)
      tree->row_tensors[first + row]->copy_row_major(
          0, out.subspan(row * per_row * itemsize, per_row * itemsize));
  };
  if (!tree->matrix) {
    column.row_pointers = [tree, itemsize, dtype](std::uint64_t first, std::uint64_t count,
                                                  const std::byte** rows) {
      for (std::uint64_t i = 0; i < count; ++i) {
        const Tensor& row = *tree->row_tensors[first + i];
        if (row.dtype != dtype || !row.is_contiguous_le() ||
            row.nbytes() != tree->row_elements * itemsize)
          return false;
        rows[i] = row.contiguous_bytes().data();
      }
      return true;
    };
    return;
  }
  if (!tree->matrix->is_contiguous_le()) return;
  // A whole matrix in the file: rows can be used where they lie, and once read, their pages need
  // not stay resident.
  column.release_rows = [tree, itemsize](std::uint64_t first, std::uint64_t count) {
    const auto rows = matrix_rows(*tree, itemsize, first, count);
    if (!rows.empty()) release_if_mapped_file(rows.data(), rows.size());
  };
  column.direct_rows = [tree, itemsize](std::uint64_t first,
                                        std::uint64_t count) -> const std::byte* {
    const auto rows = matrix_rows(*tree, itemsize, first, count);
    return rows.size() == count * tree->row_elements * itemsize ? rows.data() : nullptr;
  };
}

}  // namespace gpucache::detail
