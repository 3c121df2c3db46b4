// Row access for pack: the hot path. Dense little-endian sources are converted straight from the
// mapped bytes; anything strided or big-endian goes through a small bounce buffer.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/float_convert.hpp"
#include "gpucache/error.hpp"
#include "gpucache/schema.hpp"
#include "schema_dtypes.hpp"

namespace gpucache {
namespace {

constexpr std::uint64_t kBounceElements = 1 << 16;

std::string where(const ColumnSource& column) {
  return "column " + column.name + " (path '" + column.path + "')";
}

// Elements [first, first + count) of tensor, in row-major order, as out_dtype.
void read_elements(const Tensor& tensor, std::uint64_t first, std::uint64_t count, DType out_dtype,
                   std::byte* out) {
  const std::size_t in_size = dtype_size(tensor.dtype);
  if (out_dtype == tensor.dtype) {
    tensor.copy_row_major(first, {out, count * in_size});
    return;
  }
  // out_dtype is f32 and the source a float type (checked by read_rows). widen_to_f32 writes
  // floats, so an output not aligned for them goes through the bounce buffer too.
  const bool aligned = reinterpret_cast<std::uintptr_t>(out) % alignof(float) == 0;
  if (tensor.is_contiguous_le() && aligned) {
    detail::widen_to_f32(tensor.dtype, tensor.contiguous_bytes().data() + first * in_size,
                         reinterpret_cast<float*>(out), count);
    return;
  }
  const std::uint64_t chunk_limit = std::min(count, kBounceElements);
  std::vector<std::byte> bounce(chunk_limit * in_size);
  std::vector<float> widened(aligned ? 0 : chunk_limit);
  for (std::uint64_t done = 0; done < count;) {
    const std::uint64_t chunk = std::min(count - done, kBounceElements);
    tensor.copy_row_major(first + done, {bounce.data(), chunk * in_size});
    if (aligned) {
      detail::widen_to_f32(tensor.dtype, bounce.data(), reinterpret_cast<float*>(out) + done,
                           chunk);
    } else {
      detail::widen_to_f32(tensor.dtype, bounce.data(), widened.data(), chunk);
      std::memcpy(out + done * sizeof(float), widened.data(), chunk * sizeof(float));
    }
    done += chunk;
  }
}

}  // namespace

void read_rows(const ColumnSource& column, std::uint64_t first_row, std::uint64_t count,
               DType out_dtype, std::span<std::byte> out) {
  if (column.kind != ColumnKind::numeric)
    throw Error(column.origin, where(column), "is a text column; read it with text_row");
  const auto end_row = detail::checked_add(first_row, count);
  if (!end_row || *end_row > column.rows)
    throw Error(column.origin, where(column),
                "rows " + std::to_string(first_row) + " + " + std::to_string(count) +
                    " are out of range (the column has " + std::to_string(column.rows) + ")");
  const bool widening = out_dtype == DType::f32 && detail::widens_to_f32(column.dtype);
  if (out_dtype != column.dtype && !widening)
    throw Error(column.origin, where(column),
                "cannot be read as " + std::string(dtype_name(out_dtype)) + ": it holds " +
                    std::string(dtype_name(column.dtype)) + ", readable as itself" +
                    (detail::widens_to_f32(column.dtype) ? " or as f32" : ""));
  const auto elements = detail::checked_mul(count, column.dim);
  const auto bytes =
      elements ? detail::checked_mul(*elements, dtype_size(out_dtype)) : std::nullopt;
  if (!bytes || *bytes != out.size())
    throw Error(column.origin, where(column),
                std::to_string(count) + " rows of " + std::to_string(column.dim) + " " +
                    std::string(dtype_name(out_dtype)) + " need " +
                    (bytes ? std::to_string(*bytes) : std::string("more than 2^64")) +
                    " bytes, the output holds " + std::to_string(out.size()));
  if (count == 0) return;

  if (column.matrix) {
    read_elements(*column.matrix, first_row * column.dim, *elements, out_dtype, out.data());
    return;
  }
  const std::uint64_t row_bytes = column.dim * dtype_size(out_dtype);
  for (std::uint64_t row = 0; row < count; ++row)
    read_elements(*column.row_tensors[first_row + row], 0, column.dim, out_dtype,
                  out.data() + row * row_bytes);
}

std::string_view text_row(const ColumnSource& column, std::uint64_t row) {
  if (column.kind != ColumnKind::text)
    throw Error(column.origin, where(column), "is a numeric column; read it with read_rows");
  if (row >= column.row_texts.size())
    throw Error(column.origin, where(column),
                "row " + std::to_string(row) + " is out of range (the column has " +
                    std::to_string(column.row_texts.size()) + ")");
  return column.row_texts[row];
}

}  // namespace gpucache
