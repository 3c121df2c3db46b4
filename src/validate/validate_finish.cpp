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
#include "kernels/validate_cpu.hpp"
#include "validator_state.hpp"

namespace gpucache {
namespace {

// Rows are visited in windows of this many; after each, the per-row arrays' pages of the window
// are released, so a loop over every row keeps only one window resident.
constexpr std::uint64_t kWindowRows = std::uint64_t(1) << 20;

template <class Visit>
void for_each_window(detail::ValidatorState& state, Visit&& visit) {
  const std::uint64_t total = state.status.size();
  for (std::uint64_t first = 0; first < total; first += kWindowRows) {
    const std::uint64_t end = std::min(total, first + kWindowRows);
    visit(first, end);
    state.release_rows(first, end - first);
  }
}

// Which source each row came from, from the batches (sorted by first row) rather than from an
// array of four bytes a row. source_of() takes any row; a Cursor walks rows in ascending order.
class BatchSources {
 public:
  explicit BatchSources(detail::ValidatorState& state) : batches_(state.batches) {
    std::sort(batches_.begin(), batches_.end(),
              [](const auto& a, const auto& b) { return a.first_row < b.first_row; });
    // Batches never overlap (check_batch refuses that), so they cover every row exactly when
    // they tile [0, total): the first gap names the first row no batch covered.
    const std::uint64_t total = state.status.size();
    std::uint64_t next = 0;
    for (const auto& batch : batches_) {
      if (batch.first_row != next) break;
      next += batch.rows;
    }
    if (next != total)
      throw Error(
          "", fmt::format("row {}", next),
          fmt::format("no batch covered this row; batches must cover rows 0..{}", total - 1));
  }

  std::uint32_t source_of(std::uint64_t row) const {
    const auto after = std::upper_bound(
        batches_.begin(), batches_.end(), row,
        [](std::uint64_t r, const detail::ValidatorState::Batch& b) { return r < b.first_row; });
    return std::prev(after)->source;
  }

  class Cursor {
   public:
    explicit Cursor(const BatchSources& sources) : batches_(sources.batches_) {}
    std::uint32_t source_of(std::uint64_t row) noexcept {
      while (row >= batches_[at_].first_row + batches_[at_].rows) ++at_;
      return batches_[at_].source;
    }

   private:
    const std::vector<detail::ValidatorState::Batch>& batches_;
    std::size_t at_ = 0;
  };

 private:
  std::vector<detail::ValidatorState::Batch> batches_;
};

// Groups rows by hash (sorted by (hash, row), so each group lists its rows in order) and splits
// each group of two or more into byte-equal classes; a class is named by its first row. The norm
// of every row that is not its class's first (only such rows can be duplicates) goes to
// `duplicate_norms` when the column keeps no norms of its own.
std::vector<std::uint64_t> duplicate_classes(
    detail::ValidatorState& state, unsigned column, const RowFetcher& fetch_row,
    std::vector<detail::ValidatorState::DropNorm>& duplicate_norms) {
  const std::uint64_t total = state.status.size();
  std::vector<std::uint64_t> keys, rows;
  for (std::uint64_t r = 0; r < total; ++r)
    if (state.status[r].valid()) {
      keys.push_back(state.hashes[column][r]);
      rows.push_back(r);
    }
  state.hashes[column].clear();
  state.backend.sort_by_key(keys.data(), rows.data(), rows.size());

  const bool keeps_norms = state.columns[column].keeps_norms;
  const std::uint64_t values_per_row = state.columns[column].layout.values;
  std::vector<std::uint64_t> representative(total);
  struct Class {
    std::uint64_t row;
    std::vector<float> values;
  };
  std::vector<Class> classes;
  std::vector<float> values(values_per_row);
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
        if (!keeps_norms)
          duplicate_norms.push_back(
              {row, column,
               detail::norm_of(
                   detail::cpu_summarize(values.data(), values_per_row, false).sum_squares)});
      } else {
        classes.push_back({row, values});
        representative[row] = row;
      }
    }
    begin = end;
  }
  return representative;
}

// In row order, a valid row is a duplicate when, in some dedup column, an earlier row kept so
// far holds the same bytes; otherwise it is kept and claims its values in every dedup column.
std::vector<detail::ValidatorState::DropNorm> resolve_duplicates(detail::ValidatorState& state,
                                                                 const RowFetcher& fetch_row) {
  std::vector<detail::ValidatorState::DropNorm> duplicate_norms;
  std::vector<unsigned> columns;
  for (unsigned c = 0; c < state.columns.size(); ++c)
    if (state.columns[c].dedup) columns.push_back(c);
  std::vector<std::vector<std::uint64_t>> representative;
  for (const unsigned c : columns)
    representative.push_back(duplicate_classes(state, c, fetch_row, duplicate_norms));
  const std::uint64_t total = state.status.size();
  std::vector<std::vector<bool>> claimed(columns.size(), std::vector<bool>(total, false));
  for (std::uint64_t r = 0; r < total; ++r) {
    if (!state.status[r].valid()) continue;
    std::size_t duplicate = columns.size();
    for (std::size_t k = 0; k < columns.size() && duplicate == columns.size(); ++k)
      if (claimed[k][representative[k][r]]) duplicate = k;
    if (duplicate < columns.size()) {
      state.status[r].drop(DropReason::duplicate, columns[duplicate]);
      continue;
    }
    for (std::size_t k = 0; k < columns.size(); ++k) claimed[k][representative[k][r]] = true;
  }
  std::sort(duplicate_norms.begin(), duplicate_norms.end());
  return duplicate_norms;
}

void resolve_overflow(detail::ValidatorState& state, const BatchSources& sources) {
  if (state.options.on_overflow == OverflowPolicy::clamp) return;
  for_each_window(state, [&](std::uint64_t first, std::uint64_t end) {
    for (std::uint64_t r = first; r < end; ++r) {
      detail::RowStatus& status = state.status[r];
      if (!status.valid() || !status.overflows()) continue;
      const unsigned column = status.column();
      if (state.options.on_overflow == OverflowPolicy::error) {
        const ColumnChecks& checks = state.columns[column].checks;
        throw Error(
            "",
            fmt::format("row {} (source {}) column {}", r, sources.source_of(r),
                        checks.column.empty() ? std::to_string(column) : "'" + checks.column + "'"),
            fmt::format("a value overflows {} on conversion (on_overflow=error; use clamp "
                        "or drop)",
                        dtype_name(state.columns[column].layout.output_dtype)));
      }
      status.drop(DropReason::overflow, column);
    }
  });
}

// Per source, keeps the `take` valid rows with the smallest (sample key, row).
// Keeps the whole status array and an order of the valid rows resident (documented in
// docs/cli.md: sampling costs about 13 bytes a row).
void apply_sampling(detail::ValidatorState& state, const BatchSources& sources) {
  const ValidationOptions& options = state.options;
  if (!options.max_rows_per_source && !options.sample_fraction) return;
  struct Quota {
    std::uint64_t valid = 0, take = 0, taken = 0;
  };
  std::map<std::uint32_t, Quota> quotas;
  const std::uint64_t total = state.status.size();
  BatchSources::Cursor cursor(sources);
  for (std::uint64_t r = 0; r < total; ++r)
    if (state.status[r].valid()) ++quotas[cursor.source_of(r)].valid;
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
  detail::SpillArray<std::uint8_t> selected(state.spill);
  selected.resize(total);
  for (std::uint64_t r = 0; r < total; ++r) selected[r] = state.status[r].valid();
  detail::SpillArray<std::uint64_t> order(state.spill);
  order.resize(valid_rows);
  state.backend.order_selected_rows(selected.data(), total, true, options.seed,
                                    detail::kPurposeSample, order.data());
  selected.clear();
  for (const std::uint64_t row : order) {
    Quota& quota = quotas[sources.source_of(row)];
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

NormStats norm_stats(detail::ValidatorState& state, unsigned column) {
  const ColumnChecks& checks = state.columns[column].checks;
  const detail::SpillArray<double>& norms = state.norms[column];
  NormStats stats;
  stats.column = column;
  // An open bound takes the kept rows' smallest positive (largest) norm.
  double low = checks.norm_min, high = checks.norm_max;
  if (!(low > 0.0) || !std::isfinite(high)) {
    double smallest = INFINITY, largest = 0.0;
    for_each_window(state, [&](std::uint64_t first, std::uint64_t end) {
      for (std::uint64_t r = first; r < end; ++r) {
        if (!state.status[r].stored() || !std::isfinite(norms[r])) continue;
        if (norms[r] > 0.0) smallest = std::min(smallest, norms[r]);
        largest = std::max(largest, norms[r]);
      }
    });
    if (!std::isfinite(high)) high = largest;
    if (!(low > 0.0)) low = std::isfinite(smallest) ? smallest : high;
    if (!(low > 0.0)) low = 1.0;
    high = std::max(high, low);
  }
  stats.bin_edges = histogram_edges(low, high);
  stats.bin_counts.assign(kNormBins, 0);
  double sum = 0.0;
  for_each_window(state, [&](std::uint64_t first, std::uint64_t end) {
    for (std::uint64_t r = first; r < end; ++r) {
      if (!state.status[r].stored()) continue;
      const double norm = norms[r];
      if (!std::isfinite(norm)) continue;
      stats.min = stats.count ? std::min(stats.min, norm) : norm;
      stats.max = stats.count ? std::max(stats.max, norm) : norm;
      sum += norm;
      ++stats.count;
      const auto above = std::upper_bound(stats.bin_edges.begin(), stats.bin_edges.end(), norm);
      const auto bin = std::clamp<std::ptrdiff_t>(above - stats.bin_edges.begin() - 1, 0,
                                                  std::ptrdiff_t(kNormBins) - 1);
      ++stats.bin_counts[static_cast<std::size_t>(bin)];
    }
  });
  if (stats.count) stats.mean = sum / double(stats.count);
  return stats;
}

// The norm of a dropped row's failing column: kept per row, or recorded when it was dropped.
double reject_norm(const detail::ValidatorState& state,
                   const std::vector<detail::ValidatorState::DropNorm>& duplicate_norms,
                   std::uint64_t row, DropReason reason, unsigned column) {
  if (reason == DropReason::null) return 0.0;  // its column is no Validator column
  if (state.columns[column].keeps_norms) return state.norms[column][row];
  const auto& recorded = reason == DropReason::duplicate ? duplicate_norms : state.drop_norms;
  const auto found = std::lower_bound(recorded.begin(), recorded.end(),
                                      detail::ValidatorState::DropNorm{row, column, 0.0});
  return found != recorded.end() && found->row == row && found->column == column
             ? found->norm
             : detail::quiet_nan_double();
}

}  // namespace

ValidationResult Validator::finish(const RowFetcher& fetch_row) {
  detail::ValidatorState& state = *state_;
  if (state.finished) throw Error("", "Validator::finish", "called twice");
  state.finished = true;

  const BatchSources sources(state);
  std::sort(state.drop_norms.begin(), state.drop_norms.end());
  std::vector<detail::ValidatorState::DropNorm> duplicate_norms;
  if (state.any_dedup()) duplicate_norms = resolve_duplicates(state, fetch_row);
  resolve_overflow(state, sources);
  apply_sampling(state, sources);

  ValidationResult result;
  result.device = state.backend.device();
  result.uploaded_bytes = state.backend.uploaded_bytes();
  const std::uint64_t total = state.status.size();
  result.rows_checked = total;
  std::map<std::uint32_t, SourceReport> reports;
  std::uint64_t output_rows = 0;
  BatchSources::Cursor cursor(sources);
  for_each_window(state, [&](std::uint64_t first, std::uint64_t end) {
    for (std::uint64_t r = first; r < end; ++r) {
      const detail::RowStatus status = state.status[r];
      const std::uint32_t source = cursor.source_of(r);
      SourceReport& report = reports[source];
      report.source = source;
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
        if (status.overflows()) ++result.rows_clamped;
        continue;
      }
      RejectedRow reject;
      reject.row = r;
      reject.source = source;
      reject.source_row = source_row;
      reject.reason = reason;
      reject.column = status.column();
      reject.norm = reject_norm(state, duplicate_norms, r, reason, status.column());
      if (reason == DropReason::pair_cos) reject.pair_cosine = state.cosines[r];
      result.rejects.push_back(reject);
    }
  });
  for (auto& [source, report] : reports) result.sources.push_back(report);
  for (unsigned c = 0; c < state.columns.size(); ++c)
    if (state.columns[c].checks.checks.has(Check::norm))
      result.norms.push_back(norm_stats(state, c));

  result.rows = RowList(state.spill);
  if (state.options.shuffle) {
    // The keyed order needs every stored row at once (documented: 9 bytes a row resident).
    detail::SpillArray<std::uint8_t> selected(state.spill);
    selected.resize(total);
    for (std::uint64_t r = 0; r < total; ++r) selected[r] = state.status[r].stored();
    result.rows.resize(output_rows);
    state.backend.order_selected_rows(selected.data(), total, true, state.options.seed,
                                      detail::kPurposeShuffle, result.rows.data());
  } else {
    // Input order: the stored rows, appended window by window.
    result.rows.resize(output_rows);
    std::uint64_t written = 0;
    for_each_window(state, [&](std::uint64_t first, std::uint64_t end) {
      const std::uint64_t from = written;
      for (std::uint64_t r = first; r < end; ++r)
        if (state.status[r].stored()) result.rows[written++] = r;
      result.rows.release(from, written - from);
    });
  }
  result.rows.release_all();

  // The Validator is spent: give its per-row memory back before the conversion pass.
  state.status = {};
  for (auto& norms : state.norms) norms = {};
  state.cosines = {};
  state.drop_norms = {};
  state.null_rows = {};
  state.batches = {};
  return result;
}

}  // namespace gpucache
