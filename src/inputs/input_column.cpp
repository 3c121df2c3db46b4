#include "gpucache/input_column.hpp"
#include "gpucache/column_name.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/float_convert.hpp"
#include "gpucache/error.hpp"

namespace gpucache {
namespace {

std::string where(const InputColumn& column) {
  return "column " + column.name + " (path '" + column.path + "')";
}

}  // namespace

void read_rows_as(const InputColumn& column, std::uint64_t first, std::uint64_t count,
                  DType out_dtype, std::span<std::byte> out) {
  const DType dtype = column.dtype;
  if (column.kind != ColumnKind::tensor)
    throw Error(column.origin, where(column), "is a text column; read it with read_text");
  const auto end_row = detail::checked_add(first, count);
  if (!end_row || *end_row > column.rows)
    throw Error(column.origin, where(column),
                "rows " + std::to_string(first) + " + " + std::to_string(count) +
                    " are out of range (the column has " + std::to_string(column.rows) + ")");
  const bool widening = out_dtype == DType::f32 && detail::widens_to_f32(dtype);
  if (out_dtype != dtype && !widening)
    throw Error(column.origin, where(column),
                "cannot be read as " + std::string(dtype_name(out_dtype)) + ": it holds " +
                    std::string(dtype_name(dtype)) + ", readable as itself" +
                    (detail::widens_to_f32(dtype) ? " or as f32" : ""));
  const std::uint64_t per_row = column.row_elements();
  const auto elements = detail::checked_mul(count, per_row);
  const auto bytes =
      elements ? detail::checked_mul(*elements, dtype_size(out_dtype)) : std::nullopt;
  if (!bytes || *bytes != out.size())
    throw Error(column.origin, where(column),
                std::to_string(count) + " rows of " + std::to_string(per_row) + " " +
                    std::string(dtype_name(out_dtype)) + " need " +
                    (bytes ? std::to_string(*bytes) : std::string("more than 2^64")) +
                    " bytes, the output holds " + std::to_string(out.size()));
  if (count == 0) return;
  if (out_dtype == dtype) {
    column.read_rows(first, count, out);
    return;
  }
  // Widening writes floats, which `out` may not be aligned for: convert into an aligned buffer.
  std::vector<std::byte> raw(*elements * dtype_size(dtype));
  column.read_rows(first, count, raw);
  std::vector<float> widened(*elements);
  detail::widen_to_f32(dtype, raw.data(), widened.data(), *elements);
  std::memcpy(out.data(), widened.data(), out.size());
}

std::string_view read_text(const InputColumn& column, std::uint64_t row) {
  if (column.kind != ColumnKind::text)
    throw Error(column.origin, where(column), "is a numeric column; read it with read_rows_as");
  if (row >= column.rows)
    throw Error(column.origin, where(column),
                "row " + std::to_string(row) + " is out of range (the column has " +
                    std::to_string(column.rows) + ")");
  return column.text_row(row);
}

std::string column_name_from_path(std::string_view path) {
  // The field's own name, changed only where it is no legal column name (column.hpp): an HDF5
  // dataset "/group/x" is "group_x" ('/' would make export's file per column a directory).
  while (!path.empty() && path.front() == '/') path.remove_prefix(1);
  std::string name = legal_column_name(path);
  return name.empty() ? "_" : name;
}

void make_column_names_unique(std::vector<InputColumn>& columns) {
  std::set<std::string> names;
  for (auto& column : columns) {
    const std::string base = column.name;
    for (int n = 2; !names.insert(column.name).second; ++n) {
      std::string suffix(1, '_');  // not "_" + ...: GCC 12's false -Wrestrict there
      suffix += std::to_string(n);
      std::size_t keep = std::min(base.size(), kMaxColumnNameBytes - suffix.size());
      // Not inside a UTF-8 character: step back over continuation bytes (10xxxxxx).
      while (keep > 0 && keep < base.size() &&
             (static_cast<unsigned char>(base[keep]) & 0xC0) == 0x80)
        --keep;
      column.name = base.substr(0, keep) + suffix;
    }
  }
}

}  // namespace gpucache
