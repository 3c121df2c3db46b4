// Validator::finish(): duplicates, overflow drops, sampling, output order and the report.
// Everything here works on the per-row statuses and norms, never on row data, except the
// byte comparison of rows whose hashes collide (through the caller's RowFetcher).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "gpucache/error.hpp"
#include "gpucache/validate.hpp"
#include "validator_state.hpp"

namespace gpucache {
namespace {

using detail::kMaxColumns;

std::vector<std::uint32_t> row_sources(const detail::ValidatorState& state) {
  const std::uint64_t total = state.status.size();
  for (std::uint64_t r = 0; r < total; ++r)
    if (!state.status[r].seen())
      throw Error(
          "", fmt::format("row {}", r),
          fmt::format("no batch covered this row; batches must cover rows 0..{}", total - 1));
  std::vector<std::uint32_t> sources(total);
  for (const auto& batch : state.batches)
    std::fill_n(sources.begin() + static_cast<std::ptrdiff_t>(batch.first_row), batch.rows,
                batch.source);
  return sources;
}

// Groups rows by hash (sorted by (hash, row), so each group lists its rows in order) and splits
// each group of two or more into byte-equal classes; a class is named by its first row.
std::vector<std::uint64_t> duplicate_classes(detail::ValidatorState& state, unsigned column,
                                             const RowFetcher& fetch_row) {
  const std::uint64_t total = state.status.size();
  std::vector<std::uint64_t> keys, rows;
  for (std::uint64_t r = 0; r < total; ++r)
    if (state.status[r].valid()) {
      keys.push_back(state.hashes[column][r]);
      rows.push_back(r);
    }
  std::vector<std::uint64_t>().swap(state.hashes[column]);
  state.backend.sort_by_key(keys.data(), rows.data(), rows.size());

  std::vector<std::uint64_t> representative(total);
  struct Class {
    std::uint64_t row;
    std::vector<float> values;
  };
  std::vector<Class> classes;
  std::vector<float> values(state.dims[column]);
  for (std::size_t begin = 0; begin < rows.size();) {
    std::size_t end = begin + 1;
    while (end < rows.size() && keys[end] == keys[begin]) ++end;
    if (end - begin == 1) {
      representative[rows[begin]] = rows[begin];
      begin = end;
      continue;
    }
    if (!fetch_row)
      throw Error("", "dedup",
                  "rows with equal hashes must be compared byte for byte, but "
                  "Validator::finish() was given no row fetcher");
    classes.clear();
    for (std::size_t i = begin; i < end; ++i) {
      const std::uint64_t row = rows[i];
      fetch_row(row, column, std::span<float>(values));
      const auto match = std::find_if(classes.begin(), classes.end(), [&](const Class& known) {
        return std::memcmp(known.values.data(), values.data(), values.size() * sizeof(float)) == 0;
      });
      if (match != classes.end()) {
        representative[row] = match->row;
      } else {
        classes.push_back({row, values});
        representative[row] = row;
      }
    }
    begin = end;
  }
  return representative;
}

// In row order, a valid row is a duplicate when, in some column, an earlier row kept so far
// holds the same bytes; otherwise it is kept and claims its values in every column.
void resolve_duplicates(detail::ValidatorState& state, const RowFetcher& fetch_row) {
  const unsigned columns = state.params.columns;
  std::vector<std::uint64_t> representative[kMaxColumns];
  for (unsigned c = 0; c < columns; ++c) representative[c] = duplicate_classes(state, c, fetch_row);
  const std::uint64_t total = state.status.size();
  std::vector<bool> claimed[kMaxColumns];
  for (unsigned c = 0; c < columns; ++c) claimed[c].assign(total, false);
  for (std::uint64_t r = 0; r < total; ++r) {
    if (!state.status[r].valid()) continue;
    unsigned duplicate_column = columns;
    for (unsigned c = 0; c < columns && duplicate_column == columns; ++c)
      if (claimed[c][representative[c][r]]) duplicate_column = c;
    if (duplicate_column < columns) {
      state.status[r].drop(DropReason::duplicate, duplicate_column);
      continue;
    }
    for (unsigned c = 0; c < columns; ++c) claimed[c][representative[c][r]] = true;
  }
}

void resolve_overflow(detail::ValidatorState& state, const std::vector<std::uint32_t>& sources) {
  if (state.options.on_overflow == OverflowPolicy::clamp) return;
  for (std::uint64_t r = 0; r < state.status.size(); ++r) {
    detail::RowStatus& status = state.status[r];
    if (!status.valid() || !status.overflow_columns()) continue;
    const unsigned column = status.first_overflow_column();
    if (state.options.on_overflow == OverflowPolicy::error)
      throw Error("", fmt::format("row {} (source {}) column {}", r, sources[r], column),
                  fmt::format("a value overflows {} on conversion (on_overflow=error; use clamp "
                              "or drop)",
                              dtype_name(state.options.output_dtype)));
    status.drop(DropReason::overflow, column);
  }
}

// Per source, keeps the `take` valid rows with the smallest (sample key, row).
void apply_sampling(detail::ValidatorState& state, const std::vector<std::uint32_t>& sources) {
  const ValidationOptions& options = state.options;
  if (!options.max_rows_per_source && !options.sample_fraction) return;
  struct Quota {
    std::uint64_t valid = 0, take = 0, taken = 0;
  };
  std::map<std::uint32_t, Quota> quotas;
  const std::uint64_t total = state.status.size();
  for (std::uint64_t r = 0; r < total; ++r)
    if (state.status[r].valid()) ++quotas[sources[r]].valid;
  bool any_left_out = false;
  std::uint64_t valid_rows = 0;
  for (auto& [source, quota] : quotas) {
    quota.take = quota.valid;
    if (options.sample_fraction)
      quota.take = std::min(quota.take, static_cast<std::uint64_t>(std::floor(
                                            *options.sample_fraction * double(quota.valid) + 0.5)));
    if (options.max_rows_per_source)
      quota.take = std::min(quota.take, *options.max_rows_per_source);
    any_left_out |= quota.take < quota.valid;
    valid_rows += quota.valid;
  }
  if (!any_left_out) return;
  std::vector<std::uint8_t> selected(total);
  for (std::uint64_t r = 0; r < total; ++r) selected[r] = state.status[r].valid();
  std::vector<std::uint64_t> order(valid_rows);
  state.backend.order_selected_rows(selected.data(), total, true, options.seed,
                                    detail::kPurposeSample, order.data());
  for (const std::uint64_t row : order) {
    Quota& quota = quotas[sources[row]];
    if (quota.taken < quota.take)
      ++quota.taken;
    else
      state.status[row].sample_out();
  }
}

std::vector<double> histogram_edges(double low, double high) {
  std::vector<double> edges(kNormBins + 1);
  for (std::size_t i = 0; i <= kNormBins; ++i)
    edges[i] = low * std::pow(high / low, double(i) / double(kNormBins));
  edges.front() = low;
  edges.back() = high;
  return edges;
}

NormStats norm_stats(const detail::ValidatorState& state, unsigned column) {
  NormStats stats;
  stats.bin_edges = histogram_edges(state.options.norm_min, state.options.norm_max);
  stats.bin_counts.assign(kNormBins, 0);
  double sum = 0.0;
  for (std::uint64_t r = 0; r < state.status.size(); ++r) {
    if (!state.status[r].stored()) continue;
    const double norm = state.norms[column][r];
    stats.min = stats.count ? std::min(stats.min, norm) : norm;
    stats.max = stats.count ? std::max(stats.max, norm) : norm;
    sum += norm;
    ++stats.count;
    const auto above = std::upper_bound(stats.bin_edges.begin(), stats.bin_edges.end(), norm);
    const auto bin = std::clamp<std::ptrdiff_t>(above - stats.bin_edges.begin() - 1, 0,
                                                std::ptrdiff_t(kNormBins) - 1);
    ++stats.bin_counts[static_cast<std::size_t>(bin)];
  }
  if (stats.count) stats.mean = sum / double(stats.count);
  return stats;
}

}  // namespace

ValidationResult Validator::finish(const RowFetcher& fetch_row) {
  detail::ValidatorState& state = *state_;
  if (state.finished) throw Error("", "Validator::finish", "called twice");
  state.finished = true;
  state.records = {};

  const std::vector<std::uint32_t> sources = row_sources(state);
  if (state.params.dedup) resolve_duplicates(state, fetch_row);
  resolve_overflow(state, sources);
  apply_sampling(state, sources);

  ValidationResult result;
  result.device = state.backend.device();
  const std::uint64_t total = state.status.size();
  result.rows_checked = total;
  std::map<std::uint32_t, SourceReport> reports;
  std::uint64_t output_rows = 0;
  for (std::uint64_t r = 0; r < total; ++r) {
    const detail::RowStatus status = state.status[r];
    SourceReport& report = reports[sources[r]];
    report.source = sources[r];
    const std::uint64_t source_row = report.rows++;
    const DropReason reason = status.reason();
    if (reason == DropReason::kept && status.sampled_out()) {
      ++report.sampled_out;
      ++result.sampled_out;
      continue;
    }
    ++report.reasons[static_cast<std::size_t>(reason)];
    ++result.reasons[static_cast<std::size_t>(reason)];
    if (reason == DropReason::kept) {
      ++output_rows;
      if (status.overflow_columns()) ++result.rows_clamped;
      continue;
    }
    const unsigned column = status.failing_column();
    RejectedRow reject;
    reject.row = r;
    reject.source = sources[r];
    reject.source_row = source_row;
    reject.reason = reason;
    reject.column = static_cast<std::uint8_t>(column);
    reject.norm = state.norms[column][r];
    if (reason == DropReason::pair_cos) reject.pair_cosine = state.cosines[r];
    result.rejects.push_back(reject);
  }
  for (auto& [source, report] : reports) result.sources.push_back(report);
  for (unsigned c = 0; c < state.params.columns; ++c) result.norms.push_back(norm_stats(state, c));

  std::vector<std::uint8_t> selected(total);
  for (std::uint64_t r = 0; r < total; ++r) selected[r] = state.status[r].stored();
  result.rows.resize(output_rows);
  state.backend.order_selected_rows(selected.data(), total, state.options.shuffle,
                                    state.options.seed, detail::kPurposeShuffle,
                                    result.rows.data());

  // The Validator is spent: give its per-row memory back before the conversion pass.
  state.status = {};
  for (unsigned c = 0; c < kMaxColumns; ++c) state.norms[c] = {};
  state.cosines = {};
  state.batches = {};
  return result;
}

}  // namespace gpucache
