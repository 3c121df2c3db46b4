#include "source.hpp"

#include "gpucache/common/mapped_file.hpp"
#include "gpucache/input.hpp"
#include "gpucache/schema.hpp"

namespace gpucache::detail {
namespace {

// Rows [first, first + count) of a column stored as one contiguous little-endian matrix; empty
// when they are not all inside it.
std::span<const std::byte> matrix_rows(const ColumnSource& column, std::uint64_t first,
                                       std::uint64_t count) {
  const std::uint64_t row_bytes = column.dim * dtype_size(column.dtype);
  const auto bytes = column.matrix->contiguous_bytes();
  if (first + count < first || (first + count) * row_bytes > bytes.size()) return {};
  return bytes.subspan(first * row_bytes, count * row_bytes);
}

}  // namespace

Source open_source(const std::string& path, const SourceOptions& options) {
  Source source;
  source.path = path;
  source.root = read_input(path, ReadOptions{options.threads});
  auto shared =
      std::make_shared<SourceMapping>(map_source(source.root, path, options.kind, options.fields));
  source.rows = shared->rows;
  for (const ColumnSource& column : shared->columns) {
    SourceColumn out;
    out.name = column.name;
    if (column.kind == gpucache::ColumnKind::text) {
      out.kind = shard::ColumnKind::text;
      out.text_row = [shared, &column](std::uint64_t row) { return text_row(column, row); };
    } else {
      out.kind = shard::ColumnKind::tensor;
      out.dtype = column.dtype;
      out.dim = column.dim;
      // Float columns are vectors (embeddings); an integer column of one value per row is a scalar.
      out.rank = dtype_is_float(column.dtype) || column.dim != 1 ? 2 : 1;
      out.read_rows = [shared, &column](std::uint64_t first, std::uint64_t count,
                                        std::span<std::byte> bytes) {
        read_rows(column, first, count, column.dtype, bytes);
      };
      if (!column.matrix)
        out.row_pointers = [shared, &column](std::uint64_t first, std::uint64_t count,
                                             const std::byte** rows) {
          for (std::uint64_t i = 0; i < count; ++i) {
            const Tensor& row = *column.row_tensors[first + i];
            if (row.dtype != column.dtype || !row.is_contiguous_le() ||
                row.nbytes() != column.dim * dtype_size(column.dtype))
              return false;
            rows[i] = row.contiguous_bytes().data();
          }
          return true;
        };
      if (column.matrix && column.matrix->is_contiguous_le()) {
        // A whole matrix in the file: once rows are read, their pages need not stay resident.
        out.release_rows = [shared, &column](std::uint64_t first, std::uint64_t count) {
          const auto rows = matrix_rows(column, first, count);
          if (!rows.empty()) release_if_mapped_file(rows.data(), rows.size());
        };
        out.direct_rows = [shared, &column](std::uint64_t first,
                                            std::uint64_t count) -> const std::byte* {
          const auto rows = matrix_rows(column, first, count);
          return rows.size() == count * column.dim * dtype_size(column.dtype) ? rows.data()
                                                                              : nullptr;
        };
      }
    }
    source.columns.push_back(std::move(out));
  }
  source.mapping = std::move(shared);
  return source;
}

}  // namespace gpucache::detail
