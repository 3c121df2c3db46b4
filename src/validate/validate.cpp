// Validator construction and pass 1 (check_batch); finish() is in validate_finish.cpp.
#include "gpucache/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpucache/error.hpp"
#include "validator_state.hpp"

namespace gpucache {

namespace {

[[noreturn]] void invalid_option(const std::string& option, const std::string& cause) {
  throw Error("", "validation option " + option, cause);
}

detail::CheckParams make_check_params(const ValidationOptions& options,
                                      const std::vector<std::uint64_t>& dims) {
  if (dims.empty() || dims.size() > detail::kMaxColumns)
    invalid_option("columns",
                   fmt::format("validation takes 1 or 2 embedding columns, got {}", dims.size()));
  for (std::size_t c = 0; c < dims.size(); ++c)
    if (dims[c] == 0) invalid_option("columns", fmt::format("column {} has dim 0", c));
  if (!(options.norm_min > 0.0) || !(options.norm_max < INFINITY) ||
      options.norm_min > options.norm_max)
    invalid_option("norm_min/norm_max",
                   fmt::format("need 0 < norm_min <= norm_max < infinity, got {} and {}",
                               options.norm_min, options.norm_max));
  detail::CheckParams params;
  params.columns = static_cast<std::uint32_t>(dims.size());
  for (std::size_t c = 0; c < dims.size(); ++c) params.dims[c] = dims[c];
  params.norm_min = options.norm_min;
  params.norm_max = options.norm_max;
  if (options.pair_cos_min || options.pair_cos_max) {
    if (dims.size() != 2 || dims[0] != dims[1])
      invalid_option("pair_cos_min/pair_cos_max",
                     "needs two embedding columns (question, answer) of the same dim");
    params.pair_cos = 1;
    params.cos_min = options.pair_cos_min.value_or(-INFINITY);
    params.cos_max = options.pair_cos_max.value_or(INFINITY);
    if (std::isnan(params.cos_min) || std::isnan(params.cos_max) || params.cos_min > params.cos_max)
      invalid_option("pair_cos_min/pair_cos_max",
                     fmt::format("need pair_cos_min <= pair_cos_max, got {} and {}", params.cos_min,
                                 params.cos_max));
  }
  params.dedup = options.dedup;
  switch (options.output_dtype) {
    case DType::f32:
      params.output = detail::OutputType::f32;
      break;
    case DType::f16:
      params.output = detail::OutputType::f16;
      break;
    case DType::bf16:
      params.output = detail::OutputType::bf16;
      break;
    default:
      invalid_option("output_dtype", fmt::format("embeddings convert to f32, f16 or bf16, not {}",
                                                 dtype_name(options.output_dtype)));
  }
  params.normalize = options.normalize;
  if (options.sample_fraction &&
      !(*options.sample_fraction > 0.0 && *options.sample_fraction <= 1.0))
    invalid_option("sample_fraction",
                   fmt::format("must be in (0, 1], got {}", *options.sample_fraction));
  if (options.max_rows_per_source && *options.max_rows_per_source == 0)
    invalid_option("max_rows_per_source", "must be at least 1");
  return params;
}

// Grows geometrically: batches arrive one by one and the total is not known up front.
template <class T>
void grow(std::vector<T>& values, std::uint64_t size) {
  if (values.size() >= size) return;
  if (size > values.capacity())
    values.reserve(std::max<std::uint64_t>(size, values.capacity() * 2));
  values.resize(size);
}

}  // namespace

std::string_view overflow_policy_name(OverflowPolicy policy) noexcept {
  switch (policy) {
    case OverflowPolicy::drop:
      return "drop";
    case OverflowPolicy::clamp:
      return "clamp";
    case OverflowPolicy::error:
      return "error";
  }
  return "unknown";
}

std::optional<OverflowPolicy> parse_overflow_policy(std::string_view name) noexcept {
  if (name == "drop") return OverflowPolicy::drop;
  if (name == "clamp") return OverflowPolicy::clamp;
  if (name == "error") return OverflowPolicy::error;
  return std::nullopt;
}

ConversionOptions conversion_options(const ValidationOptions& options, std::uint64_t padded_dim) {
  ConversionOptions conversion;
  conversion.output_dtype = options.output_dtype;
  conversion.padded_dim = padded_dim;
  conversion.normalize = options.normalize;
  conversion.on_overflow = options.on_overflow;
  conversion.device = options.device;
  conversion.threads = options.threads;
  return conversion;
}

Validator::Validator(ValidationOptions options, std::vector<std::uint64_t> column_dims) {
  detail::CheckParams params = make_check_params(options, column_dims);
  detail::ComputeBackend backend(options.device, options.threads);
  state_ = std::make_unique<detail::ValidatorState>(std::move(options), std::move(column_dims),
                                                    params, std::move(backend));
}

Validator::~Validator() = default;
Validator::Validator(Validator&&) noexcept = default;
Validator& Validator::operator=(Validator&&) noexcept = default;

Device Validator::device() const noexcept {
  return state_->backend.device();
}
const std::string& Validator::device_description() const noexcept {
  return state_->backend.description();
}

namespace {

// Everything a batch does around the check itself: its arguments are checked and the per-row
// arrays grown, then check(records) runs and each row's verdict is recorded (failing at once on an
// overflow that nothing decided later can save). has_column(c): the batch has data for column c.
template <typename HasColumn, typename Check>
void run_batch(detail::ValidatorState& state, std::uint64_t first_row, std::uint64_t rows,
               std::uint32_t source, HasColumn has_column, Check check) {
  if (state.finished) throw Error("", "Validator::check_batch", "called after finish()");
  if (rows == 0) return;
  const unsigned column_count = state.params.columns;
  for (unsigned c = 0; c < column_count; ++c)
    if (!has_column(c))
      throw Error("", fmt::format("batch at row {}", first_row),
                  fmt::format("no data for embedding column {}", c));
  if (first_row > std::numeric_limits<std::uint64_t>::max() - rows)
    throw Error("", fmt::format("batch at row {}", first_row), "row index overflows");
  const std::uint64_t end = first_row + rows;

  grow(state.status, end);
  for (std::uint64_t r = first_row; r < end; ++r)
    if (state.status[r].seen())
      throw Error("", fmt::format("rows {}..{}", first_row, end - 1),
                  fmt::format("batch overlaps row {}, which an earlier batch checked", r));
  for (unsigned c = 0; c < column_count; ++c) {
    grow(state.norms[c], end);
    if (state.params.dedup) grow(state.hashes[c], end);
  }
  if (state.params.pair_cos) grow(state.cosines, end);

  state.records.resize(rows);
  check(state.records.data());

  std::uint64_t first_overflow = detail::kNoRow;
  for (std::uint64_t i = 0; i < rows; ++i) {
    const detail::RowRecord& record = state.records[i];
    const std::uint64_t r = first_row + i;
    state.status[r] =
        detail::RowStatus::checked(record.reason, record.column, record.would_overflow);
    for (unsigned c = 0; c < column_count; ++c) {
      state.norms[c][r] = record.norm[c];
      if (state.params.dedup) state.hashes[c][r] = record.hash[c];
    }
    if (state.params.pair_cos) state.cosines[r] = record.cosine;
    if (record.would_overflow && first_overflow == detail::kNoRow) first_overflow = i;
  }
  state.batches.push_back({first_row, rows, source});

  // Without dedup nothing decided later can save a row that overflows, and with one column its
  // duplicates overflow too: fail now rather than after the whole first pass.
  if (first_overflow != detail::kNoRow && state.options.on_overflow == OverflowPolicy::error &&
      (!state.params.dedup || column_count == 1)) {
    const detail::RowRecord& record = state.records[first_overflow];
    const unsigned column = (record.would_overflow & 1) ? 0 : 1;
    throw Error(
        "", fmt::format("row {} (source {}) column {}", first_row + first_overflow, source, column),
        fmt::format("a value overflows {} on conversion (on_overflow=error; use clamp "
                    "or drop)",
                    dtype_name(state.options.output_dtype)));
  }
}

}  // namespace

void Validator::check_batch(const float* const* columns, std::uint64_t first_row,
                            std::uint64_t rows, std::uint32_t source) {
  detail::ValidatorState& state = *state_;
  run_batch(
      state, first_row, rows, source, [&](unsigned c) { return columns && columns[c]; },
      [&](detail::RowRecord* records) {
        state.backend.check_rows(state.params, columns, rows, records);
      });
}

void Validator::check_rows(const float* const* const* row_pointers, std::uint64_t first_row,
                           std::uint64_t rows, std::uint32_t source) {
  detail::ValidatorState& state = *state_;
  const unsigned column_count = state.params.columns;
  auto has_column = [&](unsigned c) {
    if (!row_pointers || !row_pointers[c]) return false;
    return std::all_of(row_pointers[c], row_pointers[c] + rows,
                       [](const float* row) { return row != nullptr; });
  };
  if (state.backend.device() == Device::cpu)
    return run_batch(state, first_row, rows, source, has_column, [&](detail::RowRecord* records) {
      state.backend.check_row_pointers(state.params, row_pointers, rows, records);
    });
  // A GPU takes one contiguous transfer per column.
  std::vector<std::vector<float>> gathered(column_count);
  std::vector<const float*> columns(column_count);
  for (unsigned c = 0; c < column_count && rows > 0; ++c) {
    if (!has_column(c)) break;  // check_batch reports it
    const std::uint64_t dim = state.params.dims[c];
    gathered[c].resize(rows * dim);
    for (std::uint64_t r = 0; r < rows; ++r)
      std::copy_n(row_pointers[c][r], dim, gathered[c].data() + r * dim);
    columns[c] = gathered[c].data();
  }
  check_batch(columns.data(), first_row, rows, source);
}

}  // namespace gpucache
