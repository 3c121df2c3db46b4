// Validator construction and pass 1 (check_batch); finish() is in validate_finish.cpp.
#include "gpucache/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "gpucache/error.hpp"
#include "validator_state.hpp"

namespace gpucache {

namespace {

[[noreturn]] void invalid_option(const std::string& option, const std::string& cause) {
  throw Error("", "validation option " + option, cause);
}

// "'images'", or the column's index for the legacy constructor's unnamed columns.
std::string column_label(const ColumnChecks& checks, std::size_t index) {
  return checks.column.empty() ? std::to_string(index) : "'" + checks.column + "'";
}

// A checked column's storage type, as its checks see it (the rule is compute_backend's).
detail::OutputType output_type(DType dtype) {
  return detail::output_type_for(dtype, false, "validation option output_dtype");
}

void check_norm_bounds(double norm_min, double norm_max, const std::string& where) {
  if (!(norm_min >= 0.0) || !(norm_max > 0.0) || !(norm_min <= norm_max))
    invalid_option("norm_min/norm_max" + where,
                   fmt::format("need 0 <= norm_min <= norm_max and 0 < norm_max (norm_min 0 and "
                               "norm_max inf are open bounds), got {} and {}",
                               norm_min, norm_max));
}

// Every column's checks (options.columns, or the legacy rules) checked against its layout.
std::vector<detail::ValidatorColumn> make_columns(const ValidationOptions& options,
                                                  const std::vector<ColumnLayout>& layouts) {
  if (layouts.size() > detail::RowStatus::kMaxColumns)
    invalid_option("columns", fmt::format("at most {} columns are checked, got {}",
                                          detail::RowStatus::kMaxColumns, layouts.size()));
  std::vector<ColumnChecks> checks;
  if (options.columns) {
    if (options.columns->size() != layouts.size())
      invalid_option("columns", fmt::format("{} columns have checks, but {} columns have rows",
                                            options.columns->size(), layouts.size()));
    checks = *options.columns;
  } else {
    checks = legacy_column_checks(options, std::vector<std::string>(layouts.size()));
  }
  std::vector<detail::ValidatorColumn> columns(layouts.size());
  for (std::size_t c = 0; c < layouts.size(); ++c) {
    detail::ValidatorColumn& column = columns[c];
    column.checks = checks[c];
    column.layout = layouts[c];
    const std::string label = column_label(column.checks, c);
    if (layouts[c].values == 0)
      invalid_option("columns", fmt::format("column {} has no values per row", label));
    if (column.checks.checks.has(Check::overflow))
      invalid_option("columns", fmt::format("column {}: overflow is not chosen per column; "
                                            "on_overflow decides it for every f16/bf16 column",
                                            label));
    detail::ColumnRule& rule = column.rule;
    rule.finite = column.checks.checks.has(Check::finite);
    rule.nonzero = column.checks.checks.has(Check::nonzero);
    rule.norm = column.checks.checks.has(Check::norm);
    if (rule.norm) {
      check_norm_bounds(column.checks.norm_min, column.checks.norm_max,
                        column.checks.column.empty() ? "" : " of column " + label);
      rule.norm_min = column.checks.norm_min;
      rule.norm_max = column.checks.norm_max;
    }
    rule.output = output_type(layouts[c].output_dtype);
    rule.normalize = column.checks.normalized;
    column.dedup = column.checks.checks.has(Check::dedup);
    column.keeps_norms = rule.norm || column.checks.checks.has(Check::pair_cos);
  }
  return columns;
}

void check_run_options(const ValidationOptions& options) {
  if (options.sample_fraction &&
      !(*options.sample_fraction > 0.0 && *options.sample_fraction <= 1.0))
    invalid_option("sample_fraction",
                   fmt::format("must be in (0, 1], got {}", *options.sample_fraction));
  if (options.max_rows_per_source && *options.max_rows_per_source == 0)
    invalid_option("max_rows_per_source", "must be at least 1");
}

// The two pair_cos columns and their bounds.
void set_pair(detail::ValidatorState& state) {
  const ValidationOptions& options = state.options;
  std::vector<unsigned> pair;
  for (unsigned c = 0; c < state.columns.size(); ++c)
    if (state.columns[c].checks.checks.has(Check::pair_cos)) pair.push_back(c);
  const bool bounds = options.pair_cos_min || options.pair_cos_max;
  if (pair.empty() && !bounds) return;
  if (pair.size() != 2 ||
      state.columns[pair[0]].layout.values != state.columns[pair[1]].layout.values)
    invalid_option(
        "pair_cos_min/pair_cos_max",
        fmt::format("needs two columns with the pair_cos check (a question and an answer "
                    "embedding) of the same values per row; {} have it",
                    pair.size()));
  if (!bounds)
    invalid_option("pair_cos_min/pair_cos_max",
                   "the pair_cos check needs pair_cos_min or pair_cos_max");
  state.pair = std::pair{pair[0], pair[1]};
  state.cos_min = options.pair_cos_min.value_or(-INFINITY);
  state.cos_max = options.pair_cos_max.value_or(INFINITY);
  if (std::isnan(state.cos_min) || std::isnan(state.cos_max) || state.cos_min > state.cos_max)
    invalid_option("pair_cos_min/pair_cos_max",
                   fmt::format("need pair_cos_min <= pair_cos_max, got {} and {}", state.cos_min,
                               state.cos_max));
}

std::vector<ColumnLayout> legacy_layouts(const ValidationOptions& options,
                                         const std::vector<std::uint64_t>& dims) {
  if (dims.empty() || dims.size() > 2)
    invalid_option("columns",
                   fmt::format("validation takes 1 or 2 embedding columns, got {}", dims.size()));
  std::vector<ColumnLayout> layouts;
  for (const std::uint64_t dim : dims) layouts.emplace_back(dim, options.output_dtype);
  return layouts;
}

// Grows geometrically: batches arrive one by one and the total is not known up front.
// (SpillArray grows its capacity geometrically itself.)
template <class T>
void grow(detail::SpillArray<T>& values, std::uint64_t size) {
  if (values.size() < size) values.resize(size);
}

// `stored`: the column's storage type. f64 rows stored as f64 are checked on their f64 values
// (InputType::f64_kept); rows converted to another type on the values rounded to f32.
detail::InputType input_type(DType dtype, DType stored, std::size_t column) {
  if (dtype == DType::f64 && stored == DType::f64) return detail::InputType::f64_kept;
  if (const auto input = detail::input_type_for(dtype)) return *input;
  throw Error("", fmt::format("column {}", column),
              fmt::format("checks read f32, f16, bf16 or f64 rows, not {}", dtype_name(dtype)));
}

}  // namespace

std::vector<ColumnChecks> legacy_column_checks(const ValidationOptions& options,
                                               const std::vector<std::string>& columns) {
  std::vector<ColumnChecks> checks;
  const bool pair = (options.pair_cos_min || options.pair_cos_max) && columns.size() == 2;
  for (const auto& name : columns) {
    ColumnChecks column;
    column.column = name;
    column.checks = {Check::finite, Check::nonzero, Check::norm};
    if (options.dedup) column.checks.add(Check::dedup);
    if (pair) column.checks.add(Check::pair_cos);
    column.norm_min = options.norm_min;
    column.norm_max = options.norm_max;
    column.normalized = options.normalize;
    checks.push_back(std::move(column));
  }
  return checks;
}

std::vector<ColumnChecks> resolve_column_checks(const ValidationOptions& options,
                                                const std::vector<std::string>& legacy_columns) {
  return options.columns ? *options.columns : legacy_column_checks(options, legacy_columns);
}

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

Validator::Validator(ValidationOptions options, std::span<const ColumnLayout> columns) {
  check_run_options(options);
  std::vector<detail::ValidatorColumn> checked =
      make_columns(options, std::vector<ColumnLayout>(columns.begin(), columns.end()));
  detail::ComputeBackend backend(options.device, options.threads);
  state_ = std::make_unique<detail::ValidatorState>(std::move(options), std::move(checked),
                                                    std::move(backend));
  set_pair(*state_);
  state_->norms.resize(state_->columns.size());
  state_->hashes.resize(state_->columns.size());
}

void Validator::spill_to(std::string directory, std::uint64_t heap_limit_bytes) {
  detail::ValidatorState& state = *state_;
  if (!state.status.empty() || state.finished)
    throw Error("", "Validator::spill_to", "called after the first batch");
  state.spill = detail::SpillPolicy{std::move(directory), heap_limit_bytes};
  state.status = detail::SpillArray<detail::RowStatus>(state.spill);
  for (auto& column : state.norms) column = detail::SpillArray<double>(state.spill);
  for (auto& column : state.hashes) column = detail::SpillArray<std::uint64_t>(state.spill);
  state.cosines = detail::SpillArray<double>(state.spill);
}

void Validator::drop_null_rows(std::vector<NullRow> rows) {
  detail::ValidatorState& state = *state_;
  if (!state.status.empty() || state.finished)
    throw Error("", "Validator::drop_null_rows", "called after the first batch");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0 && rows[i].row <= rows[i - 1].row)
      throw Error("", fmt::format("null row {}", rows[i].row),
                  "null rows must be ascending and each row given once");
    if (rows[i].column > detail::RowStatus::kMaxColumns)
      throw Error(
          "", fmt::format("null row {}", rows[i].row),
          fmt::format("column {} is above {}", rows[i].column, detail::RowStatus::kMaxColumns));
  }
  state.null_rows = std::move(rows);
}

Validator::Validator(ValidationOptions options, std::vector<std::uint64_t> column_dims)
    : Validator(options, legacy_layouts(options, column_dims)) {}

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

// Everything a batch does around the checks themselves: the per-row arrays are grown; then,
// column by column, summarize(c, out) writes the summary of each row of column c and the verdicts
// are folded in check order (the failure first in check order wins, the lowest column among
// equals); dot(a, b, out) gives the pair's dot products; each row's verdict is recorded, failing
// at once on an overflow that nothing decided later can save.
template <typename Summarize, typename Dot>
void run_batch(detail::ValidatorState& state, std::uint64_t first_row, std::uint64_t rows,
               std::uint32_t source, Summarize summarize, Dot dot) {
  if (first_row > std::numeric_limits<std::uint64_t>::max() - rows)
    throw Error("", fmt::format("batch at row {}", first_row), "row index overflows");
  const std::uint64_t end = first_row + rows;
  grow(state.status, end);
  for (std::uint64_t r = first_row; r < end; ++r)
    if (state.status[r].seen())
      throw Error("", fmt::format("rows {}..{}", first_row, end - 1),
                  fmt::format("batch overlaps row {}, which an earlier batch checked", r));
  const auto column_count = static_cast<unsigned>(state.columns.size());
  for (unsigned c = 0; c < column_count; ++c) {
    if (state.columns[c].keeps_norms) grow(state.norms[c], end);
    if (state.columns[c].dedup) grow(state.hashes[c], end);
  }
  if (state.pair) grow(state.cosines, end);

  // The verdict so far of each row of the batch, and its first overflowing column.
  constexpr unsigned kNone = ~0u;
  std::vector<DropReason> reasons(rows, DropReason::kept);
  std::vector<unsigned> failing(rows, 0), overflowing(rows, kNone);
  std::vector<double> failing_norms(rows, 0.0), overflowing_norms(rows, 0.0);
  auto order = [](DropReason reason) {
    return reason == DropReason::kept ? ~0u : drop_reason_info(reason).check_order;
  };
  // Rows holding a null are dropped before any check: null is first in check order, so no
  // column's verdict replaces it.
  std::vector<bool> null_row(rows, false);
  for (auto it =
           std::lower_bound(state.null_rows.begin(), state.null_rows.end(), first_row,
                            [](const NullRow&null, std::uint64_t row) { return null.row < row; });
       it != state.null_rows.end() && it->row < end; ++it) {
    const std::uint64_t i = it->row - first_row;
    reasons[i] = DropReason::null;
    failing[i] = it->column;
    null_row[i] = true;
  }
  std::vector<detail::ColumnSummary> summaries(column_count ? rows : 0);
  for (unsigned c = 0; c < column_count; ++c) {
    const detail::ValidatorColumn& column = state.columns[c];
    summarize(c, summaries.data());
    for (std::uint64_t i = 0; i < rows; ++i) {
      const detail::ColumnSummary& summary = summaries[i];
      const std::uint64_t r = first_row + i;
      const double norm = detail::norm_of(summary.sum_squares);
      if (column.keeps_norms) state.norms[c][r] = norm;
      if (column.dedup) state.hashes[c][r] = summary.hash;
      const DropReason reason = detail::column_verdict(column.rule, summary.sum_squares, norm);
      if (order(reason) < order(reasons[i])) {
        reasons[i] = reason;
        failing[i] = c;
        failing_norms[i] = norm;
      }
      if (overflowing[i] == kNone && detail::column_overflows(column.rule, summary.max_abs)) {
        overflowing[i] = c;
        overflowing_norms[i] = norm;
      }
    }
  }
  if (state.pair) {
    // The cosine is computed for rows that passed every check before it.
    const auto [a, b] = *state.pair;
    std::vector<double> dots(rows);
    dot(a, b, dots.data());
    for (std::uint64_t i = 0; i < rows; ++i) {
      const std::uint64_t r = first_row + i;
      state.cosines[r] = 0.0;
      if (reasons[i] != DropReason::kept) continue;
      const double cosine = dots[i] / (state.norms[a][r] * state.norms[b][r]);
      state.cosines[r] = cosine;
      if (cosine < state.cos_min || cosine > state.cos_max) {
        reasons[i] = DropReason::pair_cos;
        failing[i] = a;
        failing_norms[i] = state.norms[a][r];
      }
    }
  }

  const bool sparse_overflow_norms = state.options.on_overflow == OverflowPolicy::drop;
  std::uint64_t first_overflow = detail::kNoRow;
  for (std::uint64_t i = 0; i < rows; ++i) {
    const std::uint64_t r = first_row + i;
    const bool kept = reasons[i] == DropReason::kept;
    const bool overflows = kept && overflowing[i] != kNone;
    state.status[r] =
        detail::RowStatus::checked(reasons[i], overflows ? overflowing[i] : failing[i], overflows);
    if (!kept && !null_row[i] && !state.columns[failing[i]].keeps_norms)
      state.drop_norms.push_back({r, failing[i], failing_norms[i]});
    if (overflows && sparse_overflow_norms && !state.columns[overflowing[i]].keeps_norms)
      state.drop_norms.push_back({r, overflowing[i], overflowing_norms[i]});
    if (overflows && first_overflow == detail::kNoRow) first_overflow = i;
  }
  state.batches.push_back({first_row, rows, source});
  state.release_rows(first_row, rows);

  // A later duplicate verdict can save a row that overflows only through a dedup column other
  // than the one that overflows (in that column its duplicates overflow too): otherwise fail now
  // rather than after the whole first pass.
  if (first_overflow == detail::kNoRow || state.options.on_overflow != OverflowPolicy::error)
    return;
  for (std::uint64_t i = first_overflow; i < rows; ++i) {
    if (reasons[i] != DropReason::kept || overflowing[i] == kNone) continue;
    bool saved_by_dedup = false;
    for (unsigned c = 0; c < column_count; ++c)
      saved_by_dedup |= state.columns[c].dedup && c != overflowing[i];
    if (saved_by_dedup) continue;
    throw Error("",
                fmt::format("row {} (source {}) column {}", first_row + i, source,
                            column_label(state.columns[overflowing[i]].checks, overflowing[i])),
                fmt::format("a value overflows {} on conversion (on_overflow=error; use clamp "
                            "or drop)",
                            dtype_name(state.columns[overflowing[i]].layout.output_dtype)));
  }
}

void check_started(const detail::ValidatorState& state, std::uint64_t first_row,
                   std::size_t columns) {
  if (state.finished) throw Error("", "Validator::check_batch", "called after finish()");
  if (columns != state.columns.size())
    throw Error(
        "", fmt::format("batch at row {}", first_row),
        fmt::format("{} columns of rows for {} checked columns", columns, state.columns.size()));
}

}  // namespace

void Validator::check_batch(std::span<const ColumnBatch> columns, std::uint64_t first_row,
                            std::uint64_t rows, std::uint32_t source) {
  detail::ValidatorState& state = *state_;
  check_started(state, first_row, columns.size());
  if (rows == 0) return;
  std::vector<detail::InputType> inputs;
  for (std::size_t c = 0; c < columns.size(); ++c) {
    if (!columns[c].rows)
      throw Error("", fmt::format("batch at row {}", first_row),
                  fmt::format("no data for column {}", column_label(state.columns[c].checks, c)));
    inputs.push_back(input_type(columns[c].dtype, state.columns[c].layout.output_dtype, c));
  }
  auto bytes = [&](unsigned c) { return static_cast<const std::byte*>(columns[c].rows); };
  auto on_device = [&](unsigned c) {
    return detail::DeviceRows{static_cast<const std::byte*>(columns[c].device_rows),
                              columns[c].device_ordinal};
  };
  run_batch(
      state, first_row, rows, source,
      [&](unsigned c, detail::ColumnSummary* out) {
        const detail::SummaryParams params{state.columns[c].layout.values, inputs[c],
                                           state.columns[c].dedup};
        state.backend.summarize_rows(params, bytes(c), rows, out, on_device(c));
      },
      [&](unsigned a, unsigned b, double* out) {
        const detail::DotParams params{state.columns[a].layout.values, inputs[a], inputs[b]};
        state.backend.dot_rows(params, bytes(a), bytes(b), rows, out, on_device(a), on_device(b));
      });
}

void Validator::check_batch(const float* const* columns, std::uint64_t first_row,
                            std::uint64_t rows, std::uint32_t source) {
  std::vector<ColumnBatch> batches(state_->columns.size());
  for (std::size_t c = 0; c < batches.size(); ++c) batches[c] = {columns ? columns[c] : nullptr};
  check_batch(batches, first_row, rows, source);
}

void Validator::check_rows(std::span<const ColumnRowPointers> columns, std::uint64_t first_row,
                           std::uint64_t rows, std::uint32_t source) {
  detail::ValidatorState& state = *state_;
  check_started(state, first_row, columns.size());
  if (rows == 0) return;
  std::vector<detail::InputType> inputs;
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const bool complete = columns[c].rows && std::all_of(columns[c].rows, columns[c].rows + rows,
                                                         [](const void* row) { return row; });
    if (!complete)
      throw Error("", fmt::format("batch at row {}", first_row),
                  fmt::format("no data for column {}", column_label(state.columns[c].checks, c)));
    inputs.push_back(input_type(columns[c].dtype, state.columns[c].layout.output_dtype, c));
  }
  auto pointers = [&](unsigned c) {
    return reinterpret_cast<const std::byte* const*>(columns[c].rows);
  };
  if (state.backend.device() == Device::cpu)
    return run_batch(
        state, first_row, rows, source,
        [&](unsigned c, detail::ColumnSummary* out) {
          const detail::SummaryParams params{state.columns[c].layout.values, inputs[c],
                                             state.columns[c].dedup};
          state.backend.summarize_row_pointers(params, pointers(c), rows, out);
        },
        [&](unsigned a, unsigned b, double* out) {
          const detail::DotParams params{state.columns[a].layout.values, inputs[a], inputs[b]};
          state.backend.dot_row_pointers(params, pointers(a), pointers(b), rows, out);
        });
  // A GPU takes one contiguous transfer per column.
  std::vector<std::vector<std::byte>> gathered(columns.size());
  std::vector<ColumnBatch> batches(columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const std::size_t row_bytes = state.columns[c].layout.values * detail::input_size(inputs[c]);
    gathered[c].resize(rows * row_bytes);
    for (std::uint64_t r = 0; r < rows; ++r)
      std::memcpy(gathered[c].data() + r * row_bytes, columns[c].rows[r], row_bytes);
    batches[c] = {gathered[c].data(), columns[c].dtype};
  }
  check_batch(batches, first_row, rows, source);
}

void Validator::check_rows(const float* const* const* row_pointers, std::uint64_t first_row,
                           std::uint64_t rows, std::uint32_t source) {
  std::vector<ColumnRowPointers> columns(state_->columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c)
    columns[c] = {row_pointers ? reinterpret_cast<const void* const*>(row_pointers[c]) : nullptr};
  check_rows(columns, first_row, rows, source);
}

}  // namespace gpucache
