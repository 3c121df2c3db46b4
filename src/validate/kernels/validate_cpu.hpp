// CPU reference of the check, conversion and ordering steps. Always built; its arithmetic is the
// definition the CUDA backend matches bit for bit (docs/validation.md). Plain C++17.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/row_checks.cuh"

namespace gpucache::detail {

// Canonical lane reduction of one column of one row (sum of squares, largest magnitude, and the
// row hash when `with_hash`).
ColumnSummary cpu_summarize(const float* row, std::uint64_t dim, bool with_hash);
// Canonical fp64 dot product of two rows of `dim` elements.
double cpu_dot(const float* a, const float* b, std::uint64_t dim);

// Pass 1 over `rows` rows: columns[c] points at rows x params.dims[c] floats, row-major.
void cpu_check_rows(const CheckParams& params, const float* const* columns, std::uint64_t rows,
                    RowRecord* out, unsigned threads);

// The same for rows lying apart: rows[c][r] points at row r of column c (params.dims[c] floats).
void cpu_check_row_pointers(const CheckParams& params, const float* const* const* rows,
                            std::uint64_t count, RowRecord* out, unsigned threads);

// Pass 2: `rows` rows of params.dim floats into rows of params.padded_dim output elements.
ConvertCounts cpu_convert_rows(const ConvertParams& params, const float* in, std::uint64_t rows,
                               std::byte* out, unsigned threads);

// Sorts the pairs (keys[i], values[i]) by key, then value.
void cpu_sort_by_key(std::uint64_t* keys, std::uint64_t* values, std::uint64_t count,
                     unsigned threads);

// The rows r < count with selected[r] != 0, ordered by (row_key(seed, purpose, r), r) when
// `by_key`, else ascending. Writes them to `out` and returns how many.
std::uint64_t cpu_order_selected_rows(const std::uint8_t* selected, std::uint64_t count,
                                      bool by_key, std::uint64_t seed, std::uint64_t purpose,
                                      std::uint64_t* out, unsigned threads);

}  // namespace gpucache::detail
