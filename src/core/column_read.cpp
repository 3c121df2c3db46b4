// Row access for pack: the hot path. Dense little-endian sources are converted straight from the
// mapped bytes; anything strided or big-endian goes through a small bounce buffer.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gpucache/detail/checked_math.hpp"
#include "gpucache/error.hpp"
#include "gpucache/schema.hpp"
#include "src/core/schema_dtypes.hpp"

namespace gpucache {
namespace {

constexpr std::uint64_t kBounceElements = 1 << 16;

std::string where(const ColumnSource& column) {
  return "column " + column.name + " (path '" + column.path + "')";
}

float f16_bits_to_float(std::uint16_t half) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  std::uint32_t exponent = (half >> 10) & 0x1fu;
  std::uint32_t significand = half & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (significand << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (significand << 13);
  } else if (significand == 0) {
    bits = sign;
  } else {
    // Subnormal f16: shift until the leading one becomes the implicit bit of an f32 normal.
    exponent = 113;
    while ((significand & 0x400u) == 0) {
      significand <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((significand & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

// count little-endian elements of a float dtype to f32; exact except f64, which rounds to
// nearest. Inputs may be unaligned (safetensors does not align tensors).
void widen_to_f32(DType from, const std::byte* in, float* out, std::size_t count) noexcept {
  switch (from) {
    case DType::f32:
      std::memcpy(out, in, count * sizeof(float));
      return;
    case DType::f16:
    case DType::bf16:
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, in + 2 * i, 2);
        out[i] = from == DType::f16 ? f16_bits_to_float(bits)
                                    : std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
      }
      return;
    case DType::f64:
      for (std::size_t i = 0; i < count; ++i) {
        double value;
        std::memcpy(&value, in + 8 * i, 8);
        out[i] = static_cast<float>(value);
      }
      return;
    default:
      return;  // read_rows only widens dtypes for which widens_to_f32() holds
  }
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
    widen_to_f32(tensor.dtype, tensor.contiguous_bytes().data() + first * in_size,
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
      widen_to_f32(tensor.dtype, bounce.data(), reinterpret_cast<float*>(out) + done, chunk);
    } else {
      widen_to_f32(tensor.dtype, bounce.data(), widened.data(), chunk);
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
