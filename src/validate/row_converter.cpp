// RowConverter: pass 2 (and the standalone f32 -> f16/bf16 conversion) on either backend.
#include <fmt/format.h>

#include "compute_backend.hpp"
#include "gpucache/error.hpp"
#include "gpucache/validate.hpp"
#include "kernels/validate_cpu.hpp"

namespace gpucache {
namespace {

// What rows are converted to (the rule is compute_backend's).
detail::OutputType output_type(DType dtype) {
  return detail::output_type_for(dtype, true, "conversion option output_dtype");
}

detail::OverflowMode overflow_mode(OverflowPolicy policy) {
  switch (policy) {
    case OverflowPolicy::drop:
      return detail::OverflowMode::drop;
    case OverflowPolicy::clamp:
      return detail::OverflowMode::clamp;
    case OverflowPolicy::error:
      return detail::OverflowMode::error;
  }
  return detail::OverflowMode::error;
}

}  // namespace

struct RowConverter::State {
  ConversionOptions options;
  detail::OutputType output;  // of convert(); unused for an f64 output (convert_f64)
  detail::ComputeBackend backend;
};

RowConverter::RowConverter(ConversionOptions options) {
  // f64 rows are only ever stored from f64 inputs (convert_f64); every other type is a
  // conversion output (the dtype table's rule, compute_backend.cpp).
  const detail::OutputType output = options.output_dtype == DType::f64
                                        ? detail::OutputType::f32
                                        : output_type(options.output_dtype);
  detail::ComputeBackend backend(options.device, options.threads);
  state_ = std::make_unique<State>(State{options, output, std::move(backend)});
}

RowConverter::~RowConverter() = default;
RowConverter::RowConverter(RowConverter&&) noexcept = default;
RowConverter& RowConverter::operator=(RowConverter&&) noexcept = default;

Device RowConverter::device() const noexcept {
  return state_->backend.device();
}

std::size_t RowConverter::row_bytes(std::uint64_t dim) const {
  const std::uint64_t padded = state_->options.padded_dim ? state_->options.padded_dim : dim;
  return padded * dtype_size(state_->options.output_dtype);
}

bool RowConverter::copies_rows_unchanged(std::uint64_t dim) const noexcept {
  const ConversionOptions& options = state_->options;
  return options.output_dtype == DType::f32 && !options.normalize &&
         (options.padded_dim == 0 || options.padded_dim == dim);
}

ConversionCounts RowConverter::convert(const float* in, std::uint64_t rows, std::uint64_t dim,
                                       std::byte* out, std::uint64_t first_row) {
  const ConversionOptions& options = state_->options;
  const std::uint64_t padded = options.padded_dim ? options.padded_dim : dim;
  if (options.output_dtype == DType::f64)
    throw Error("", "conversion option output_dtype",
                "f64 rows are stored from f64 rows (convert_f64), not converted from f32");
  if (dim == 0) throw Error("", "conversion", "dim must be at least 1");
  if (padded < dim)
    throw Error("", "conversion option padded_dim",
                fmt::format("padded_dim {} is smaller than dim {}", padded, dim));
  if (rows == 0) return {};
  detail::ConvertParams params;
  params.dim = dim;
  params.padded_dim = padded;
  params.output = state_->output;
  params.normalize = options.normalize;
  params.on_overflow = overflow_mode(options.on_overflow);
  const detail::ConvertCounts counts = state_->backend.convert_rows(params, in, rows, out);
  if (counts.first_overflow_row != detail::kNoRow && options.on_overflow != OverflowPolicy::clamp)
    throw Error(
        "", fmt::format("row {}", first_row + counts.first_overflow_row),
        fmt::format("a value overflows {} on conversion ({})", dtype_name(options.output_dtype),
                    options.on_overflow == OverflowPolicy::error
                        ? "on_overflow=error; use clamp or drop"
                        : "on_overflow=drop, but the row reached conversion: drop happens "
                          "in validation"));
  return {counts.overflowed, counts.flushed};
}

void RowConverter::convert_f64(const double* in, std::uint64_t rows, std::uint64_t dim,
                               std::byte* out) {
  const ConversionOptions& options = state_->options;
  const std::uint64_t padded = options.padded_dim ? options.padded_dim : dim;
  if (options.output_dtype != DType::f64)
    throw Error("", "conversion option output_dtype",
                fmt::format("f64 rows are stored as f64 here, not as {}; convert() takes f32 rows",
                            dtype_name(options.output_dtype)));
  if (dim == 0) throw Error("", "conversion", "dim must be at least 1");
  if (padded < dim)
    throw Error("", "conversion option padded_dim",
                fmt::format("padded_dim {} is smaller than dim {}", padded, dim));
  detail::cpu_convert_rows_f64(in, rows, dim, padded, options.normalize,
                               reinterpret_cast<double*>(out), state_->backend.threads());
}

ConversionCounts convert_rows(const float* in, std::uint64_t rows, std::uint64_t dim,
                              std::uint64_t padded_dim, DType output_dtype, bool normalize,
                              OverflowPolicy on_overflow, std::byte* out, Device device,
                              unsigned threads) {
  ConversionOptions options;
  options.output_dtype = output_dtype;
  options.padded_dim = padded_dim;
  options.normalize = normalize;
  options.on_overflow = on_overflow;
  options.device = device;
  options.threads = threads;
  return RowConverter(options).convert(in, rows, dim, out);
}

}  // namespace gpucache
