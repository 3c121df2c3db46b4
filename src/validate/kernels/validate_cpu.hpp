// CPU reference of the check, conversion and ordering steps. Always built; its arithmetic is the
// definition the CUDA backend matches bit for bit (docs/validation.md). Plain C++17.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/row_checks.cuh"

namespace gpucache::detail {

// Canonical lane reduction of one row of f32 values (sum of squares, largest magnitude, and the
// row hash when `with_hash`).
ColumnSummary cpu_summarize(const float* row, std::uint64_t dim, bool with_hash);
// Canonical fp64 dot product of two rows of `dim` f32 values.
double cpu_dot(const float* a, const float* b, std::uint64_t dim);

// Pass 1, one column at a time: the summary of each of `count` rows of params.values values of
// params.input, lying one after the other from `rows`.
void cpu_summarize_rows(const SummaryParams& params, const std::byte* rows, std::uint64_t count,
                        ColumnSummary* out, unsigned threads);
// The same for rows lying apart: rows[r] points at row r.
void cpu_summarize_row_pointers(const SummaryParams& params, const std::byte* const* rows,
                                std::uint64_t count, ColumnSummary* out, unsigned threads);

// The canonical dot product of row r of `a` and row r of `b` for each of `count` rows.
void cpu_dot_rows(const DotParams& params, const std::byte* a, const std::byte* b,
                  std::uint64_t count, double* out, unsigned threads);
void cpu_dot_row_pointers(const DotParams& params, const std::byte* const* a,
                          const std::byte* const* b, std::uint64_t count, double* out,
                          unsigned threads);

// Pass 2: `rows` rows of params.dim floats into rows of params.padded_dim output elements.
ConvertCounts cpu_convert_rows(const ConvertParams& params, const float* in, std::uint64_t rows,
                               std::byte* out, unsigned threads);

// Pass 2 of a column stored as f64: `rows` rows of `dim` f64 values into rows of `padded_dim`
// (convert_row_f64), normalised when asked.
void cpu_convert_rows_f64(const double* in, std::uint64_t rows, std::uint64_t dim,
                          std::uint64_t padded_dim, bool normalize, double* out, unsigned threads);

// Sorts the pairs (keys[i], values[i]) by key, then value.
void cpu_sort_by_key(std::uint64_t* keys, std::uint64_t* values, std::uint64_t count,
                     unsigned threads);

// The rows r < count with selected[r] != 0, ordered by (row_key(seed, purpose, r), r) when
// `by_key`, else ascending. Writes them to `out` and returns how many.
std::uint64_t cpu_order_selected_rows(const std::uint8_t* selected, std::uint64_t count,
                                      bool by_key, std::uint64_t seed, std::uint64_t purpose,
                                      std::uint64_t* out, unsigned threads);

}  // namespace gpucache::detail
