// The CPU backend of validation and conversion against a naive fp64 implementation written here,
// on random and adversarial rows.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <type_traits>

#include "gpucache/error.hpp"
#include "gpucache/validate.hpp"
#include "kernels/row_checks.cuh"
#include "kernels/validate_cpu.hpp"

using namespace gpucache;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

struct Matrix {
  std::uint64_t dim = 0;
  std::vector<float> values;
  std::uint64_t rows() const { return values.size() / dim; }
  float* row(std::uint64_t r) { return values.data() + r * dim; }
  const float* row(std::uint64_t r) const { return values.data() + r * dim; }
  void push(std::vector<float> row_values) {
    REQUIRE(row_values.size() == dim);
    values.insert(values.end(), row_values.begin(), row_values.end());
  }
};

Matrix random_matrix(std::uint64_t rows, std::uint64_t dim, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<double> log_norm(std::log(0.5), std::log(50.0));
  Matrix matrix{dim, std::vector<float>(rows * dim)};
  for (std::uint64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (std::uint64_t i = 0; i < dim; ++i) {
      matrix.row(r)[i] = normal(rng);
      sum += double(matrix.row(r)[i]) * matrix.row(r)[i];
    }
    const double scale = std::exp(log_norm(rng)) / std::sqrt(sum);
    for (std::uint64_t i = 0; i < dim; ++i) matrix.row(r)[i] = float(matrix.row(r)[i] * scale);
  }
  return matrix;
}

// The canonical reduction as docs/validation.md states it, written independently of the library.
double canonical_sum_squares(const float* row, std::uint64_t dim) {
  double lanes[32] = {};
  for (std::uint64_t i = 0; i < dim; ++i) lanes[i % 32] += double(row[i]) * double(row[i]);
  for (int width = 16; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}
double canonical_norm(const float* row, std::uint64_t dim) {
  return std::sqrt(canonical_sum_squares(row, dim));
}
double naive_norm(const float* row, std::uint64_t dim) {
  double sum = 0;
  for (std::uint64_t i = 0; i < dim; ++i) sum += double(row[i]) * double(row[i]);
  return std::sqrt(sum);
}
double naive_dot(const float* a, const float* b, std::uint64_t dim) {
  double sum = 0;
  for (std::uint64_t i = 0; i < dim; ++i) sum += double(a[i]) * double(b[i]);
  return sum;
}

std::uint16_t reference_f16(float x) {
  const auto half = static_cast<_Float16>(x);
  return std::bit_cast<std::uint16_t>(half);
}
float f16_value(std::uint16_t bits) {
  return float(std::bit_cast<_Float16>(bits));
}
float bf16_value(std::uint16_t bits) {
  return std::bit_cast<float>(std::uint32_t(bits) << 16);
}
// Nearest bf16 by comparing the two candidates in fp64; ties to the even one.
std::uint16_t reference_bf16(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  const auto low = static_cast<std::uint16_t>(bits >> 16);
  if ((bits & 0xffff) == 0) return low;
  const auto high = static_cast<std::uint16_t>(low + 1);  // next magnitude (may be infinity)
  const double to_low = std::fabs(double(x) - double(bf16_value(low)));
  const double high_value = double(bf16_value(high));
  // Rounding past the largest finite value: compare with 2^128 as if the exponent went on.
  const double to_high = std::isinf(high_value)
                             ? std::fabs(std::ldexp(std::copysign(1.0, x), 128) - double(x))
                             : std::fabs(high_value - double(x));
  if (to_low < to_high) return low;
  if (to_high < to_low) return high;
  return (low & 1) ? high : low;
}

struct Run {
  ValidationOptions options;
  std::vector<Matrix*> columns;
  // (rows, source) per batch, in row order; empty = one batch of source 0.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> batches;
  int fetches = 0;
  ValidationResult result;
};

std::vector<std::uint64_t> dims_of(const std::vector<Matrix*>& columns) {
  std::vector<std::uint64_t> dims;
  for (const Matrix* m : columns) dims.push_back(m->dim);
  return dims;
}

void check_rows(Validator& validator, const std::vector<Matrix*>& columns, std::uint64_t first,
                std::uint64_t rows, std::uint32_t source) {
  std::vector<const float*> pointers;
  for (Matrix* m : columns) pointers.push_back(m->row(first));
  validator.check_batch(pointers.data(), first, rows, source);
}

RowFetcher fetcher_for(const std::vector<Matrix*>& columns, int* fetches) {
  return [columns, fetches](std::uint64_t row, std::size_t column, std::span<float> out) {
    ++*fetches;
    REQUIRE(out.size() == columns[column]->dim);
    std::memcpy(out.data(), columns[column]->row(row), out.size_bytes());
  };
}

ValidationResult& run(Run& run) {
  if (run.options.device == Device::automatic) run.options.device = Device::cpu;
  Validator validator(run.options, dims_of(run.columns));
  const std::uint64_t total = run.columns[0]->rows();
  if (run.batches.empty()) run.batches = {{total, 0}};
  std::uint64_t first = 0;
  for (const auto& [rows, source] : run.batches) {
    check_rows(validator, run.columns, first, rows, source);
    first += rows;
  }
  REQUIRE(first == total);
  run.result = validator.finish(fetcher_for(run.columns, &run.fetches));
  return run.result;
}

// Reason per row, from the rejects list (kept and sampled-out rows are kDropReasonCount).
std::vector<DropReason> reasons_by_row(const ValidationResult& result, std::uint64_t total) {
  std::vector<DropReason> reasons(total, DropReason::kept);
  for (const auto& reject : result.rejects) reasons[reject.row] = reject.reason;
  return reasons;
}

// Naive reference verdict of one row (pre-dedup), per the documented order.
DropReason naive_verdict(const ValidationOptions& options, const std::vector<Matrix*>& columns,
                         std::uint64_t r) {
  const std::size_t count = columns.size();
  std::vector<double> norms(count);
  for (std::size_t c = 0; c < count; ++c)
    norms[c] = naive_norm(columns[c]->row(r), columns[c]->dim);
  for (std::size_t c = 0; c < count; ++c)
    if (!std::isfinite(norms[c])) return DropReason::nan_inf;
  for (std::size_t c = 0; c < count; ++c)
    if (norms[c] == 0) return DropReason::zero;
  for (std::size_t c = 0; c < count; ++c)
    if (norms[c] < options.norm_min) return DropReason::norm_low;
  for (std::size_t c = 0; c < count; ++c)
    if (norms[c] > options.norm_max) return DropReason::norm_high;
  if (options.pair_cos_min || options.pair_cos_max) {
    const double cosine =
        naive_dot(columns[0]->row(r), columns[1]->row(r), columns[0]->dim) / (norms[0] * norms[1]);
    if (cosine < options.pair_cos_min.value_or(-2) || cosine > options.pair_cos_max.value_or(2))
      return DropReason::pair_cos;
  }
  return DropReason::kept;
}

}  // namespace

TEST_CASE("the lane reduction is the documented 32-lane tree and close to a plain sum") {
  for (const std::uint64_t dim : {1, 7, 31, 32, 33, 64, 100, 384, 768, 1000, 4096}) {
    const Matrix matrix = random_matrix(20, dim, dim);
    for (std::uint64_t r = 0; r < matrix.rows(); ++r) {
      const auto summary = detail::cpu_summarize(matrix.row(r), dim, true);
      CHECK(std::bit_cast<std::uint64_t>(summary.sum_squares) ==
            std::bit_cast<std::uint64_t>(canonical_sum_squares(matrix.row(r), dim)));
      CHECK(std::sqrt(summary.sum_squares) ==
            doctest::Approx(naive_norm(matrix.row(r), dim)).epsilon(1e-13));
      float largest = 0;
      for (std::uint64_t i = 0; i < dim; ++i)
        largest = std::max(largest, std::fabs(matrix.row(r)[i]));
      CHECK(summary.max_abs == largest);
    }
  }
  const Matrix a = random_matrix(5, 300, 1), b = random_matrix(5, 300, 2);
  for (std::uint64_t r = 0; r < 5; ++r)
    CHECK(detail::cpu_dot(a.row(r), b.row(r), 300) ==
          doctest::Approx(naive_dot(a.row(r), b.row(r), 300)).epsilon(1e-12));
}

TEST_CASE("random rows: verdicts, norms and kept rows match a naive fp64 implementation") {
  Matrix matrix = random_matrix(3000, 384, 42);
  // Push some rows outside the bounds, well away from them so rounding cannot matter.
  for (std::uint64_t r = 0; r < matrix.rows(); r += 7)
    for (std::uint64_t i = 0; i < matrix.dim; ++i) matrix.row(r)[i] *= (r % 2) ? 1e-3f : 1e3f;
  Run run_;
  run_.options.norm_min = 0.7;
  run_.options.norm_max = 40.0;
  run_.options.threads = 4;
  run_.columns = {&matrix};
  const auto& result = run(run_);
  const auto reasons = reasons_by_row(result, matrix.rows());
  std::vector<std::uint64_t> expected_kept;
  std::uint64_t low = 0, high = 0;
  for (std::uint64_t r = 0; r < matrix.rows(); ++r) {
    const DropReason expected = naive_verdict(run_.options, run_.columns, r);
    CHECK(reasons[r] == expected);
    if (expected == DropReason::kept) expected_kept.push_back(r);
    low += expected == DropReason::norm_low;
    high += expected == DropReason::norm_high;
  }
  CHECK(low > 100);
  CHECK(high > 100);
  CHECK(result.rows == expected_kept);
  CHECK(result.reasons[size_t(DropReason::kept)] == expected_kept.size());
  CHECK(result.reasons[size_t(DropReason::norm_low)] == low);
  CHECK(result.reasons[size_t(DropReason::norm_high)] == high);
  for (const auto& reject : result.rejects)
    CHECK(std::bit_cast<std::uint64_t>(reject.norm) ==
          std::bit_cast<std::uint64_t>(canonical_norm(matrix.row(reject.row), matrix.dim)));
  // Norm statistics over the kept rows.
  REQUIRE(result.norms.size() == 1);
  const NormStats& stats = result.norms[0];
  double sum = 0, lowest = 1e300, highest = 0;
  for (const auto r : expected_kept) {
    const double norm = canonical_norm(matrix.row(r), matrix.dim);
    sum += norm;
    lowest = std::min(lowest, norm);
    highest = std::max(highest, norm);
  }
  CHECK(stats.count == expected_kept.size());
  CHECK(stats.min == lowest);
  CHECK(stats.max == highest);
  CHECK(stats.mean == doctest::Approx(sum / double(expected_kept.size())).epsilon(1e-12));
  REQUIRE(stats.bin_edges.size() == kNormBins + 1);
  REQUIRE(stats.bin_counts.size() == kNormBins);
  CHECK(stats.bin_edges.front() == 0.7);
  CHECK(stats.bin_edges.back() == 40.0);
  std::uint64_t binned = 0;
  for (std::size_t bin = 0; bin < kNormBins; ++bin) {
    std::uint64_t expected = 0;
    for (const auto r : expected_kept) {
      const double norm = canonical_norm(matrix.row(r), matrix.dim);
      expected +=
          norm >= stats.bin_edges[bin] && (norm < stats.bin_edges[bin + 1] || bin + 1 == kNormBins);
    }
    CHECK(stats.bin_counts[bin] == expected);
    binned += stats.bin_counts[bin];
  }
  CHECK(binned == stats.count);
}

TEST_CASE("adversarial rows: NaN, infinities, subnormals, huge values, zeros") {
  Matrix m{4};
  m.push({1, 2, kNan, 0});               // 0 nan_inf
  m.push({kInf, 0, 0, 0});               // 1 nan_inf
  m.push({1, -kInf, 0, 0});              // 2 nan_inf
  m.push({1e-40f, -1e-40f, 1e-41f, 0});  // 3 subnormals: norm_low, not zero
  m.push({1e38f, 1e38f, 0, 0});          // 4 f32 sum of squares would overflow: norm_high
  m.push({0, 0, 0, 0});                  // 5 zero
  m.push({-0.0f, 0, -0.0f, 0});          // 6 signed zeros: zero
  m.push({60, 80, 0, 0});                // 7 norm exactly 100: kept
  m.push({60, 80, 1e-3f, 0});            // 8 just above 100: norm_high
  m.push({0.5f, 1e-40f, 0, 0});          // 9 a subnormal in a normal row: kept
  m.push({kNan, 0, 0, 0});               // 10 NaN beats zero
  m.push({3e38f, 3e38f, 3e38f, 3e38f});  // 11 finite, norm 6e38 (no fp64 overflow)
  Run run_;
  run_.columns = {&m};
  run_.options.norm_max = 1e39;  // so row 11 passes: its norm is finite in fp64
  const auto& result = run(run_);
  const auto reasons = reasons_by_row(result, m.rows());
  CHECK(reasons[0] == DropReason::nan_inf);
  CHECK(reasons[1] == DropReason::nan_inf);
  CHECK(reasons[2] == DropReason::nan_inf);
  CHECK(reasons[3] == DropReason::norm_low);
  CHECK(reasons[5] == DropReason::zero);
  CHECK(reasons[6] == DropReason::zero);
  CHECK(reasons[7] == DropReason::kept);
  CHECK(reasons[9] == DropReason::kept);
  CHECK(reasons[10] == DropReason::nan_inf);
  CHECK(reasons[11] == DropReason::kept);
  for (const auto& reject : result.rejects) {
    if (reject.row == 1 || reject.row == 2) CHECK(std::isinf(reject.norm));
    if (reject.row == 0 || reject.row == 10) CHECK(std::isnan(reject.norm));
    if (reject.row == 3) CHECK(reject.norm == canonical_norm(m.row(3), 4));
    if (reject.row == 3) CHECK(reject.norm > 0);
  }
  CHECK(result.norms[0].max == canonical_norm(m.row(11), 4));
  CHECK(std::isfinite(result.norms[0].max));

  Run defaults;
  defaults.columns = {&m};
  const auto& with_defaults = run(defaults);
  const auto default_reasons = reasons_by_row(with_defaults, m.rows());
  CHECK(default_reasons[4] == DropReason::norm_high);
  CHECK(default_reasons[8] == DropReason::norm_high);
  CHECK(default_reasons[11] == DropReason::norm_high);
  CHECK(default_reasons[7] == DropReason::kept);
}

TEST_CASE("norm bounds are inclusive at exactly 0.1 and 100") {
  // Search rows (a, b, c) whose canonical fp64 norm is exactly 0.1, and just below it.
  const float a = std::nextafter(0.1f, 0.0f);
  const double rest = 0.01 - double(a) * a;
  const float b0 = float(std::sqrt(rest));
  std::vector<float> exact, below;
  for (int db = -20; db <= 20 && (exact.empty() || below.empty()); ++db) {
    float b = b0;
    for (int k = 0; k < std::abs(db); ++k) b = std::nextafter(b, db < 0 ? 0.0f : 1.0f);
    const double left = 0.01 - double(a) * a - double(b) * b;
    if (left <= 0) continue;
    float c = float(std::sqrt(left));
    for (int k = 0; k < 300; ++k) c = std::nextafter(c, 0.0f);
    for (int k = 0; k < 600 && (exact.empty() || below.empty()); ++k) {
      const float row[3] = {a, b, c};
      const double norm = canonical_norm(row, 3);
      if (norm == 0.1 && exact.empty()) exact = {a, b, c};
      if (norm == std::nextafter(0.1, 0.0) && below.empty()) below = {a, b, c};
      c = std::nextafter(c, 1.0f);
    }
  }
  REQUIRE(exact.size() == 3);
  REQUIRE(below.size() == 3);
  Matrix m{3};
  m.push(exact);
  m.push(below);
  m.push({60, 80, 0});
  m.push({60, std::nextafter(80.0f, 100.0f), 0});
  Run run_;
  run_.columns = {&m};
  const auto& result = run(run_);
  const auto reasons = reasons_by_row(result, m.rows());
  CHECK(detail::cpu_summarize(m.row(0), 3, false).sum_squares ==
        canonical_sum_squares(m.row(0), 3));
  CHECK(reasons[0] == DropReason::kept);
  CHECK(reasons[1] == DropReason::norm_low);
  CHECK(reasons[2] == DropReason::kept);
  CHECK(reasons[3] == DropReason::norm_high);
  CHECK(result.norms[0].min == 0.1);
  CHECK(result.norms[0].max == 100.0);
  CHECK(result.norms[0].bin_counts.front() == 1);  // norm_min is in the first bin
  CHECK(result.norms[0].bin_counts.back() == 1);   // norm_max is in the last bin
}

TEST_CASE("every reason is counted, per source too, with the first failing reason winning") {
  Matrix q{4}, a{4};
  const auto pair = [&](std::vector<float> question, std::vector<float> answer) {
    q.push(std::move(question));
    a.push(std::move(answer));
  };
  pair({1, 0, 0, 0}, {1, 0, 0, 0});         // 0 kept
  pair({kNan, 0, 0, 0}, {0, 0, 0, 0});      // 1 nan_inf beats zero (other column)
  pair({0, 0, 0, 0}, {1e-3f, 0, 0, 0});     // 2 zero beats norm_low
  pair({1e-3f, 0, 0, 0}, {1e3f, 0, 0, 0});  // 3 norm_low beats norm_high
  pair({2e5f, 0, 0, 0}, {1, 0, 0, 0});      // 4 norm_high
  pair({1, 0, 0, 0}, {-1, 0, 0, 0});        // 5 pair_cos (cos -1)
  pair({1, 0, 0, 0}, {1, 0, 0, 0});         // 6 duplicate of 0
  pair({70000, 0, 0, 0}, {0, 1, 0, 0});     // 7 overflow in f16 (norm 7e4 allowed)
  pair({0, 1, 0, 0}, {kInf, 0, 0, 0});      // 8 nan_inf in column 1
  pair({0, 0, 1, 0}, {0, 0, 0.5f, 0});      // 9 kept
  Run run_;
  run_.columns = {&q, &a};
  run_.options.norm_max = 1e5;
  run_.options.dedup = true;
  run_.options.pair_cos_min = -0.5;
  run_.options.output_dtype = DType::f16;
  run_.options.on_overflow = OverflowPolicy::drop;
  run_.batches = {{5, 3}, {5, 1}};
  const auto& result = run(run_);
  const auto reasons = reasons_by_row(result, q.rows());
  CHECK(reasons[1] == DropReason::nan_inf);
  CHECK(reasons[2] == DropReason::zero);
  CHECK(reasons[3] == DropReason::norm_low);
  CHECK(reasons[4] == DropReason::norm_high);
  CHECK(reasons[5] == DropReason::pair_cos);
  CHECK(reasons[6] == DropReason::duplicate);
  CHECK(reasons[7] == DropReason::overflow);
  CHECK(reasons[8] == DropReason::nan_inf);
  CHECK(result.rows == std::vector<std::uint64_t>{0, 9});
  // Every reason the rows' values can give (null comes from the inputs: its own test).
  for (std::size_t reason = 1; reason < kDropReasonCount; ++reason)
    CHECK(result.reasons[reason] == (reason == size_t(DropReason::nan_inf) ? 2u
                                     : reason == size_t(DropReason::null)  ? 0u
                                                                           : 1u));
  CHECK(result.reasons[0] == 2);
  CHECK(result.rows_checked == 10);
  for (const auto& reject : result.rejects) {
    if (reject.row == 8) CHECK(reject.column == 1);
    if (reject.row == 3) CHECK(reject.column == 0);
    if (reject.row == 5) CHECK(reject.pair_cosine == -1.0);
    if (reject.row == 1) CHECK(reject.source == 3);
    if (reject.row == 8) CHECK(reject.source == 1);
    if (reject.row == 8) CHECK(reject.source_row == 3);
    if (reject.row == 3) CHECK(reject.source_row == 3);
  }
  REQUIRE(result.sources.size() == 2);
  CHECK(result.sources[0].source == 1);
  CHECK(result.sources[0].rows == 5);
  CHECK(result.sources[0].reasons[size_t(DropReason::kept)] == 1);
  CHECK(result.sources[0].reasons[size_t(DropReason::duplicate)] == 1);
  CHECK(result.sources[0].reasons[size_t(DropReason::overflow)] == 1);
  CHECK(result.sources[1].source == 3);
  CHECK(result.sources[1].reasons[size_t(DropReason::nan_inf)] == 1);
  CHECK(result.sources[1].reasons[size_t(DropReason::pair_cos)] == 0);
  CHECK(result.norms.size() == 2);
  CHECK(result.norms[1].count == 2);
  CHECK(result.norms[1].min == 0.5);
}

TEST_CASE("the drop-reason table keeps the codes, names and check order datasets rely on") {
  // The names are spelled so in --json, manifest.json and --rejects lines; the codes are what the
  // CPU and CUDA backends exchange. Neither may change.
  const std::vector<std::pair<DropReason, std::string_view>> pinned{
      {DropReason::kept, "kept"},         {DropReason::nan_inf, "nan_inf"},
      {DropReason::norm_low, "norm_low"}, {DropReason::norm_high, "norm_high"},
      {DropReason::zero, "zero"},         {DropReason::duplicate, "duplicate"},
      {DropReason::pair_cos, "pair_cos"}, {DropReason::overflow, "overflow"},
      {DropReason::null, "null"}};
  REQUIRE(kDropReasonCount == pinned.size());
  for (std::size_t code = 0; code < pinned.size(); ++code) {
    CAPTURE(code);
    CHECK(static_cast<std::size_t>(pinned[code].first) == code);
    CHECK(kDropReasons[code].reason == pinned[code].first);
    CHECK(drop_reason_name(pinned[code].first) == pinned[code].second);
    CHECK(&drop_reason_info(pinned[code].first) == &kDropReasons[code]);
  }
  CHECK(drop_reasons_in_check_order() == std::array{DropReason::null, DropReason::nan_inf,
                                                    DropReason::zero, DropReason::norm_low,
                                                    DropReason::norm_high, DropReason::pair_cos,
                                                    DropReason::duplicate, DropReason::overflow});
  CHECK(drop_reasons().size() == kDropReasonCount - 1);
  CHECK(drop_reasons().front().reason == DropReason::nan_inf);
  CHECK(drop_reason_name(static_cast<DropReason>(200)) == "unknown");
  // The kernels' verdicts carry the same enum, not a copy of its codes.
  static_assert(
      std::is_same_v<decltype(detail::column_verdict(detail::ColumnRule{}, 0.0, 0.0)), DropReason>);
}

TEST_CASE("the drop-reason table checks reject a broken table") {
  using R = DropReason;
  constexpr DropReasonInfo swapped[] = {
      {R::kept, "kept", 0, "k"}, {R::norm_low, "a", 1, "d"}, {R::nan_inf, "b", 2, "d"}};
  CHECK_FALSE(detail::drop_reason_codes_are_indices(swapped));
  constexpr DropReasonInfo same_name[] = {
      {R::kept, "kept", 0, "k"}, {R::nan_inf, "x", 1, "d"}, {R::norm_low, "x", 2, "d"}};
  CHECK(detail::drop_reason_codes_are_indices(same_name));
  CHECK_FALSE(detail::drop_reason_names_are_unique(same_name));
  constexpr DropReasonInfo undocumented[] = {{R::kept, "kept", 0, "k"}, {R::nan_inf, "a", 1, ""}};
  CHECK_FALSE(detail::drop_reason_names_are_unique(undocumented));
  constexpr DropReasonInfo same_order[] = {
      {R::kept, "kept", 0, "k"}, {R::nan_inf, "a", 1, "d"}, {R::norm_low, "b", 1, "d"}};
  CHECK_FALSE(detail::drop_reason_order_is_a_permutation(same_order));
  constexpr DropReasonInfo order_past_end[] = {
      {R::kept, "kept", 0, "k"}, {R::nan_inf, "a", 2, "d"}, {R::norm_low, "b", 3, "d"}};
  CHECK_FALSE(detail::drop_reason_order_is_a_permutation(order_past_end));
  constexpr DropReasonInfo kept_checked[] = {{R::kept, "kept", 1, "k"}, {R::nan_inf, "a", 0, "d"}};
  CHECK_FALSE(detail::drop_reason_order_is_a_permutation(kept_checked));
  constexpr DropReasonInfo good[] = {
      {R::kept, "kept", 0, "k"}, {R::nan_inf, "a", 2, "d"}, {R::norm_low, "b", 1, "d"}};
  CHECK(detail::drop_reason_codes_are_indices(good));
  CHECK(detail::drop_reason_names_are_unique(good));
  CHECK(detail::drop_reason_order_is_a_permutation(good));
}

TEST_CASE("a row failing two checks gets the one first in the table's check order") {
  // Row 0 is a clean question/answer pair; row 1 starts as a copy of it and has two failures
  // planted. Each planter breaks exactly one check in one column (duplicate: the column stays a
  // copy of row 0's; pair_cos: the other column is negated).
  constexpr std::uint64_t kDim = 64;
  using Plant = std::function<void(std::vector<float> & column, const float* reference)>;
  const std::map<DropReason, Plant> planters{
      {DropReason::nan_inf, [](auto& v, auto*) { v[5] = kNan; }},
      {DropReason::zero, [](auto& v, auto*) { std::fill(v.begin(), v.end(), 0.0f); }},
      {DropReason::norm_low,
       [](auto& v, auto*) {
         for (float& x : v) x *= 1e-3f;
       }},
      {DropReason::norm_high, [](auto& v, auto*) { std::fill(v.begin(), v.end(), 30000.0f); }},
      {DropReason::duplicate,
       [](auto& v, auto* reference) { v.assign(reference, reference + kDim); }},
      // Keeps the sign, so the pair's cosine stays positive.
      {DropReason::overflow, [](auto& v, auto*) { v[3] = std::copysign(70000.0f, v[3]); }},
  };
  // null is not planted in values: the inputs report null rows (its own test below).
  for (const auto& reason : drop_reasons())
    if (reason.reason != DropReason::pair_cos && reason.reason != DropReason::null)
      CHECK_MESSAGE(planters.count(reason.reason), "no planter for ", reason.name);

  ValidationOptions options;
  options.device = Device::cpu;
  options.dedup = true;
  options.pair_cos_min = 0.0;  // planted single-column failures leave the cosine positive
  options.norm_max = 2e5;      // above an overflowing value's norm, below norm_high's planted 2.4e5
  options.output_dtype = DType::f16;
  options.on_overflow = OverflowPolicy::drop;
  const Matrix clean = random_matrix(1, kDim, 17);
  std::vector<float> question(clean.row(0), clean.row(0) + kDim), answer = question;
  for (std::uint64_t i = 0; i < kDim; ++i) answer[i] *= 1.0f + 0.05f * float(int(i % 3) - 1);

  // `planted[c]`: the reason planted in column c, or pair_cos (planted by negating column c).
  auto verdict = [&](std::array<std::optional<DropReason>, 2> planted) {
    Matrix q{kDim, question}, a{kDim, answer};
    Matrix* columns[2] = {&q, &a};
    for (unsigned c = 0; c < 2; ++c) {
      std::vector<float> row = c == 0 ? question : answer;
      if (planted[c] == DropReason::pair_cos)
        for (float& x : row) x = -x;
      else if (planted[c])
        planters.at (*planted[c])(row, columns[c]->row(0));
      columns[c]->push(row);
    }
    Run run_;
    run_.columns = {&q, &a};
    run_.options = options;
    const auto& result = run(run_);
    REQUIRE(result.rows == std::vector<std::uint64_t>{0});
    REQUIRE(result.rejects.size() == 1);
    return std::pair{result.rejects[0].reason, unsigned(result.rejects[0].column)};
  };
  auto first_of = [](DropReason x, DropReason y) {
    return drop_reason_info(x).check_order < drop_reason_info(y).check_order ? x : y;
  };
  for (const auto& [x, plant_x] : planters) {
    for (const auto& [y, plant_y] : planters) {
      if (x == y) continue;
      CAPTURE(drop_reason_name(x));
      CAPTURE(drop_reason_name(y));
      const DropReason winner = first_of(x, y);
      CHECK(verdict({x, y}) == std::pair{winner, winner == x ? 0u : 1u});
    }
    for (unsigned c = 0; c < 2; ++c) {
      CAPTURE(drop_reason_name(x));
      CAPTURE(c);
      std::array<std::optional<DropReason>, 2> planted;
      planted[c] = x;
      planted[1 - c] = DropReason::pair_cos;
      const DropReason winner = first_of(x, DropReason::pair_cos);
      // pair_cos names column 0.
      CHECK(verdict(planted) == std::pair{winner, winner == x ? c : 0u});
    }
  }
}

TEST_CASE("null rows are dropped first, whatever their values, and name the caller's column") {
  // Rows 1 and 4 are null (their values zeros, as a reader's placeholders); row 4 also holds a NaN,
  // and row 2 (not null) a zero row. Batches split the rows so a null lies in each.
  Matrix m = random_matrix(6, 8, 3);
  std::fill(m.row(1), m.row(1) + 8, 0.0f);
  std::fill(m.row(2), m.row(2) + 8, 0.0f);
  std::fill(m.row(4), m.row(4) + 8, 0.0f);
  m.row(4)[0] = kNan;
  ValidationOptions options;
  options.device = Device::cpu;
  options.dedup = true;
  Validator validator(options, std::vector<std::uint64_t>{8});
  validator.drop_null_rows({{1, 7}, {4, 2}});
  const float* first[] = {m.row(0)};
  validator.check_batch(first, 0, 3, 0);
  const float* second[] = {m.row(3)};
  validator.check_batch(second, 3, 3, 1);
  int fetches = 0;
  const ValidationResult result = validator.finish(fetcher_for({&m}, &fetches));
  CHECK(result.rows == std::vector<std::uint64_t>{0, 3, 5});
  CHECK(result.reasons[static_cast<std::size_t>(DropReason::null)] == 2);
  CHECK(result.reasons[static_cast<std::size_t>(DropReason::zero)] == 1);
  CHECK(result.sources[1].reasons[static_cast<std::size_t>(DropReason::null)] == 1);
  REQUIRE(result.rejects.size() == 3);
  CHECK(result.rejects[0].row == 1);
  CHECK(result.rejects[0].reason == DropReason::null);
  CHECK(result.rejects[0].column == 7);
  CHECK(result.rejects[2].row == 4);
  CHECK(result.rejects[2].reason == DropReason::null);
  CHECK(result.rejects[2].column == 2);

  Validator unordered(options, std::vector<std::uint64_t>{8});
  CHECK_THROWS_AS(unordered.drop_null_rows({{4, 0}, {1, 0}}), Error);
  CHECK_THROWS_AS(unordered.drop_null_rows({{1, 0}, {1, 1}}), Error);
  unordered.check_batch(first, 0, 3, 0);
  CHECK_THROWS_AS(unordered.drop_null_rows({{1, 0}}), Error);
}

TEST_CASE("pair cosine is q.a / (|q| |a|) and its bounds are inclusive") {
  Matrix q = random_matrix(400, 64, 5), a = random_matrix(400, 64, 6);
  for (std::uint64_t r = 0; r < 400; r += 3)  // make some pairs nearly parallel
    for (std::uint64_t i = 0; i < 64; ++i) a.row(r)[i] = q.row(r)[i] * 0.5f + a.row(r)[i] * 0.01f;
  Run run_;
  run_.columns = {&q, &a};
  run_.options.pair_cos_min = 0.2;
  run_.options.pair_cos_max = 0.999;
  const auto& result = run(run_);
  const auto reasons = reasons_by_row(result, q.rows());
  int dropped = 0;
  for (std::uint64_t r = 0; r < q.rows(); ++r) {
    const double cosine =
        naive_dot(q.row(r), a.row(r), 64) / (naive_norm(q.row(r), 64) * naive_norm(a.row(r), 64));
    if (std::fabs(cosine - 0.2) < 1e-9 || std::fabs(cosine - 0.999) < 1e-9) continue;
    const bool out = cosine < 0.2 || cosine > 0.999;
    CHECK((reasons[r] == DropReason::pair_cos) == out);
    dropped += out;
  }
  CHECK(dropped > 50);
  for (const auto& reject : result.rejects) {
    const double cosine = naive_dot(q.row(reject.row), a.row(reject.row), 64) /
                          (naive_norm(q.row(reject.row), 64) * naive_norm(a.row(reject.row), 64));
    CHECK(reject.pair_cosine == doctest::Approx(cosine).epsilon(1e-12));
  }
  // Exactly at the bounds: cos = 0 and cos = 1 are kept by [0, 1].
  Matrix q2{2}, a2{2};
  q2.push({1, 0});
  a2.push({0, 1});
  q2.push({3, 4});
  a2.push({6, 8});
  Run bounds;
  bounds.columns = {&q2, &a2};
  bounds.options.pair_cos_min = 0.0;
  bounds.options.pair_cos_max = 1.0;
  CHECK(run(bounds).rows == std::vector<std::uint64_t>{0, 1});
}

TEST_CASE("duplicates: first occurrence kept, byte comparison decides, per column in dialogue") {
  Matrix m = random_matrix(50, 40, 9);
  std::memcpy(m.row(10), m.row(3), 40 * 4);
  std::memcpy(m.row(30), m.row(3), 40 * 4);
  std::memcpy(m.row(20), m.row(7), 40 * 4);
  std::memcpy(m.row(21), m.row(8), 40 * 4);
  m.row(21)[5] = -m.row(21)[5];  // one sign differs: not a duplicate
  std::memcpy(m.row(22), m.row(9), 40 * 4);
  m.row(9)[0] = 0.0f;
  m.row(22)[0] = -0.0f;  // +0 and -0 differ in bytes: not a duplicate
  Run run_;
  run_.columns = {&m};
  run_.options.dedup = true;
  const auto& result = run(run_);
  const auto reasons = reasons_by_row(result, m.rows());
  for (std::uint64_t r = 0; r < m.rows(); ++r) {
    const bool duplicate = r == 10 || r == 30 || r == 20;
    CHECK((reasons[r] == DropReason::duplicate) == duplicate);
  }
  CHECK(result.reasons[size_t(DropReason::duplicate)] == 3);
  CHECK(run_.fetches == 5);  // only rows whose hashes collide are fetched

  SUBCASE("equal hashes with different bytes are not duplicates") {
    Run lying;
    lying.columns = {&m};
    lying.options.dedup = true;
    Validator validator(ValidationOptions{.dedup = true, .device = Device::cpu}, {40});
    check_rows(validator, lying.columns, 0, m.rows(), 0);
    // The fetcher reports different bytes for row 30, though its hash equals row 3's.
    const auto fetched =
        validator.finish([&](std::uint64_t row, std::size_t, std::span<float> out) {
          std::memcpy(out.data(), m.row(row), out.size_bytes());
          if (row == 30) out[0] += 1.0f;
        });
    const auto lying_reasons = reasons_by_row(fetched, m.rows());
    CHECK(lying_reasons[10] == DropReason::duplicate);
    CHECK(lying_reasons[30] == DropReason::kept);
  }
  SUBCASE("a fetcher is required when hashes collide") {
    Validator validator(ValidationOptions{.dedup = true, .device = Device::cpu}, {40});
    check_rows(validator, {&m}, 0, m.rows(), 0);
    CHECK_THROWS_AS(validator.finish(), Error);
  }
  SUBCASE("a row dropped earlier does not make its copies duplicates") {
    Matrix q{2}, a{2};
    q.push({1, 0});
    a.push({-1, 0});  // 0: pair_cos
    q.push({1, 0});
    a.push({1, 0});  // 1: kept (row 0 was dropped before dedup)
    q.push({1, 0});
    a.push({0, 1});  // 2: duplicate of 1 in column 0
    q.push({0, 1});
    a.push({0, 1});  // 3: kept: its answer equals row 2's, but row 2 was not kept
    q.push({0, 2});
    a.push({1, 0});  // 4: duplicate of 1 in column 1
    Run dialogue;
    dialogue.columns = {&q, &a};
    dialogue.options.dedup = true;
    dialogue.options.pair_cos_min = -0.5;
    const auto& pairs = run(dialogue);
    CHECK(pairs.rows == std::vector<std::uint64_t>{1, 3});
    for (const auto& reject : pairs.rejects) {
      if (reject.row == 2) CHECK(reject.column == 0);
      if (reject.row == 4) CHECK(reject.column == 1);
      if (reject.row == 4) CHECK(reject.reason == DropReason::duplicate);
    }
  }
}

TEST_CASE("sampling and shuffling are deterministic, seeded, and independent of batching") {
  Matrix m = random_matrix(5000, 16, 3);
  const auto sample = [&](std::uint64_t seed, bool shuffle, std::uint64_t batch, unsigned threads) {
    Run run_;
    run_.columns = {&m};
    run_.options.seed = seed;
    run_.options.shuffle = shuffle;
    run_.options.sample_fraction = 0.5;
    run_.options.max_rows_per_source = 1000;
    run_.options.threads = threads;
    for (std::uint64_t first = 0; first < m.rows(); first += batch)
      run_.batches.push_back({std::min(batch, m.rows() - first), first < 3000 ? 0u : 1u});
    return run(run_);
  };
  const ValidationResult base = sample(1, false, 1000, 1);
  // Source 0: 3000 rows, half is 1500, capped at 1000; source 1: 2000 rows, half is 1000.
  CHECK(base.rows.size() == 2000);
  CHECK(std::is_sorted(base.rows.begin(), base.rows.end()));
  CHECK(std::count_if(base.rows.begin(), base.rows.end(), [](auto r) { return r < 3000; }) == 1000);
  CHECK(base.sampled_out == 3000);
  CHECK(base.sources[0].sampled_out == 2000);
  CHECK(base.sources[1].sampled_out == 1000);
  CHECK(base.norms[0].count == 2000);
  CHECK(sample(1, false, 250, 3).rows == base.rows);  // batching and threads do not matter
  CHECK(sample(2, false, 1000, 1).rows != base.rows);
  // The sample is the rows with the smallest sample keys, per source.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> keyed;
  for (std::uint64_t r = 3000; r < 5000; ++r)
    keyed.push_back({detail::row_key(1, detail::kPurposeSample, r), r});
  std::sort(keyed.begin(), keyed.end());
  std::set<std::uint64_t> expected;
  for (std::size_t i = 0; i < 1000; ++i) expected.insert(keyed[i].second);
  CHECK(std::set<std::uint64_t>(base.rows.begin() + 1000, base.rows.end()) == expected);

  const ValidationResult shuffled = sample(1, true, 1000, 1);
  CHECK(shuffled.rows != base.rows);
  CHECK(std::set<std::uint64_t>(shuffled.rows.begin(), shuffled.rows.end()) ==
        std::set<std::uint64_t>(base.rows.begin(), base.rows.end()));
  CHECK(sample(1, true, 600, 2).rows == shuffled.rows);
  CHECK(sample(7, true, 1000, 1).rows != shuffled.rows);
  // Shuffle order is ascending (shuffle key, row).
  for (std::size_t i = 1; i < shuffled.rows.size(); ++i)
    CHECK(detail::row_key(1, detail::kPurposeShuffle, shuffled.rows[i - 1]) <
          detail::row_key(1, detail::kPurposeShuffle, shuffled.rows[i]));
}

TEST_CASE("overflow on conversion: drop, clamp and error") {
  Matrix m{3};
  m.push({1, 2, 3});
  m.push({70000, 1, 0});   // overflows f16, not bf16
  m.push({65504, 0, 0});   // the largest f16: fine
  m.push({-65520, 0, 0});  // rounds to -inf in f16
  const auto make = [&](OverflowPolicy policy, DType dtype) {
    Run run_;
    run_.columns = {&m};
    run_.options.norm_max = 1e6;
    run_.options.output_dtype = dtype;
    run_.options.on_overflow = policy;
    return run_;
  };
  Run drop = make(OverflowPolicy::drop, DType::f16);
  CHECK(run(drop).rows == std::vector<std::uint64_t>{0, 2});
  CHECK(drop.result.reasons[size_t(DropReason::overflow)] == 2);
  Run clamp = make(OverflowPolicy::clamp, DType::f16);
  CHECK(run(clamp).rows == std::vector<std::uint64_t>{0, 1, 2, 3});
  CHECK(clamp.result.rows_clamped == 2);
  Run error = make(OverflowPolicy::error, DType::f16);
  try {
    run(error);
    FAIL("no overflow error");
  } catch (const Error& e) {
    CHECK(std::string(e.location()).find("row 1") != std::string::npos);
  }
  Run bf16 = make(OverflowPolicy::error, DType::bf16);
  CHECK(run(bf16).rows.size() == 4);
  Run normalized = make(OverflowPolicy::error, DType::f16);
  normalized.options.normalize = true;  // normalised values never overflow
  CHECK(run(normalized).rows.size() == 4);

  // The converter clamps to the largest finite value and counts.
  std::vector<std::uint16_t> out(4 * 3);
  const auto counts =
      convert_rows(m.values.data(), 4, 3, 3, DType::f16, false, OverflowPolicy::clamp,
                   reinterpret_cast<std::byte*>(out.data()), Device::cpu);
  CHECK(counts.overflowed == 2);
  CHECK(out[3] == 0x7bff);
  CHECK(out[6] == 0x7bff);
  CHECK(out[9] == 0xfbff);
  try {
    convert_rows(m.values.data(), 4, 3, 3, DType::f16, false, OverflowPolicy::error,
                 reinterpret_cast<std::byte*>(out.data()), Device::cpu);
    FAIL("no overflow error");
  } catch (const Error& e) {
    CHECK(e.location() == "row 1");
  }
  RowConverter converter(ConversionOptions{.output_dtype = DType::f16, .device = Device::cpu});
  CHECK_THROWS_AS(converter.convert(m.row(1), 1, 3, reinterpret_cast<std::byte*>(out.data()), 41),
                  Error);
  try {
    converter.convert(m.row(1), 1, 3, reinterpret_cast<std::byte*>(out.data()), 41);
  } catch (const Error& e) {
    CHECK(e.location() == "row 41");
  }
}

TEST_CASE("dialogue with dedup defers the overflow error to finish") {
  Matrix q{2}, a{2};
  q.push({1, 0});
  a.push({0, 1});
  q.push({70000, 0});
  a.push({0, 1});  // duplicate answer of row 0: duplicate wins over overflow
  ValidationOptions options;
  options.norm_max = 1e6;
  options.dedup = true;
  options.output_dtype = DType::f16;
  options.device = Device::cpu;
  Validator validator(options, {2, 2});
  std::vector<Matrix*> columns{&q, &a};
  check_rows(validator, columns, 0, 2, 0);
  int fetches = 0;
  const auto result = validator.finish(fetcher_for(columns, &fetches));
  CHECK(result.rows == std::vector<std::uint64_t>{0});
  CHECK(result.reasons[size_t(DropReason::duplicate)] == 1);
}

TEST_CASE("f32 to f16 and bf16: round to nearest even, overflow and flush flags") {
  const auto f16 = [](float x) { return detail::f32_to_f16(std::bit_cast<std::uint32_t>(x)); };
  const auto bf16 = [](float x) { return detail::f32_to_bf16(std::bit_cast<std::uint32_t>(x)); };
  CHECK(f16(65504.0f).bits == 0x7bff);
  CHECK_FALSE(f16(65504.0f).overflowed);
  CHECK(f16(std::nextafter(65520.0f, 0.0f)).bits == 0x7bff);
  CHECK(f16(65520.0f).bits == 0x7c00);
  CHECK(f16(65520.0f).overflowed);
  CHECK(f16(-65520.0f).bits == 0xfc00);
  CHECK(f16(kInf).bits == 0x7c00);
  CHECK_FALSE(f16(kInf).overflowed);  // infinity was not finite to begin with
  CHECK(f16(1e-8f).bits == 0);
  CHECK(f16(1e-8f).flushed);
  CHECK(f16(-1e-8f).bits == 0x8000);
  CHECK(f16(std::ldexp(1.0f, -24)).bits == 0x0001);  // smallest subnormal
  CHECK(f16(std::ldexp(1.0f, -25)).bits == 0x0000);  // tie to even (0)
  CHECK(f16(std::ldexp(3.0f, -25)).bits == 0x0002);  // tie between 1 and 2 -> 2
  CHECK(f16(std::ldexp(1.5f, -25)).bits == 0x0001);
  CHECK(f16(1.0f + std::ldexp(1.0f, -11)).bits == 0x3c00);                 // tie -> even
  CHECK(f16(1.0f + std::ldexp(3.0f, -11)).bits == 0x3c02);                 // tie -> even (up)
  CHECK(f16(std::ldexp(1.0f, -14)).bits == 0x0400);                        // smallest normal
  CHECK(f16(std::nextafter(std::ldexp(1.0f, -14), 0.0f)).bits == 0x0400);  // rounds up
  CHECK(f16(0.0f).bits == 0);
  CHECK_FALSE(f16(0.0f).flushed);
  CHECK(f16(-0.0f).bits == 0x8000);
  const auto nan16 = f16(kNan).bits;
  CHECK((nan16 & 0x7c00) == 0x7c00);
  CHECK((nan16 & 0x03ff) != 0);
  CHECK(f16(std::bit_cast<float>(0x7f800001u)).bits == 0x7e00);  // signalling NaN stays NaN

  CHECK(bf16(1.0f).bits == 0x3f80);
  CHECK(bf16(1.0f + std::ldexp(1.0f, -8)).bits == 0x3f80);  // tie -> even
  CHECK(bf16(1.0f + std::ldexp(3.0f, -8)).bits == 0x3f82);  // tie -> even (up)
  CHECK(bf16(std::bit_cast<float>(0x7f7f7fffu)).bits == 0x7f7f);
  CHECK(bf16(std::bit_cast<float>(0x7f7f8000u)).bits == 0x7f80);  // tie rounds to infinity
  CHECK(bf16(std::bit_cast<float>(0x7f7f8000u)).overflowed);
  CHECK(bf16(std::numeric_limits<float>::max()).overflowed);
  CHECK(bf16(std::bit_cast<float>(0x00008000u)).bits == 0);  // tie to even zero
  CHECK(bf16(std::bit_cast<float>(0x00008000u)).flushed);
  CHECK(bf16(std::bit_cast<float>(0x00008001u)).bits == 1);
  CHECK(bf16(kNan).bits == 0x7fc0);
  CHECK(bf16(std::bit_cast<float>(0x7f800001u)).bits == 0x7fc0);
  CHECK(bf16(-kInf).bits == 0xff80);

  // Against the compiler's _Float16 conversion and a nearest-value search for bf16, on a sweep
  // of bit patterns that visits every exponent with varied low bits.
  std::uint64_t mismatches16 = 0, mismatches_bf16 = 0;
  for (std::uint64_t pattern = 0; pattern <= 0xffffffffull; pattern += 4093) {
    for (const std::uint32_t low : {0u, 0x1000u, 0x0fffu, 0x8000u, 0x7fffu, 0x18000u}) {
      const std::uint32_t bits = (std::uint32_t(pattern) & ~0x1ffffu) | low;
      const float x = std::bit_cast<float>(bits);
      const auto ours16 = detail::f32_to_f16(bits);
      if (std::isnan(x)) {
        mismatches16 += (ours16.bits & 0x7e00) != 0x7e00;
      } else {
        const std::uint16_t expected = reference_f16(x);
        mismatches16 += ours16.bits != expected;
        mismatches16 += ours16.overflowed != (std::isinf(f16_value(expected)) && !std::isinf(x));
        mismatches16 += ours16.flushed != (f16_value(expected) == 0 && x != 0);
      }
      const auto oursb = detail::f32_to_bf16(bits);
      const std::uint16_t expected_bf16 = reference_bf16(x);
      mismatches_bf16 += oursb.bits != expected_bf16;
      if (!std::isnan(x))
        mismatches_bf16 +=
            oursb.overflowed != (std::isinf(bf16_value(expected_bf16)) && !std::isinf(x));
    }
    const float x = std::bit_cast<float>(std::uint32_t(pattern));
    if (!std::isnan(x))
      mismatches16 += detail::f32_to_f16(std::uint32_t(pattern)).bits != reference_f16(x);
  }
  CHECK(mismatches16 == 0);
  CHECK(mismatches_bf16 == 0);
}

TEST_CASE("conversion: padding, normalisation, counts, threads") {
  Matrix m = random_matrix(257, 37, 11);
  m.row(5)[3] = 1e-9f;  // flushes to zero in f16
  m.row(6)[0] = 0;      // a true zero is not a flush
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (const bool normalize : {false, true}) {
      const std::size_t element = dtype_size(dtype);
      const std::uint64_t padded = 48;
      std::vector<std::byte> out(m.rows() * padded * element, std::byte{0xAB});
      std::vector<std::byte> single(out.size());
      RowConverter converter(ConversionOptions{.output_dtype = dtype,
                                               .padded_dim = padded,
                                               .normalize = normalize,
                                               .device = Device::cpu,
                                               .threads = 4});
      CHECK(converter.row_bytes(37) == padded * element);
      const auto counts = converter.convert(m.values.data(), m.rows(), 37, out.data());
      const auto single_counts =
          convert_rows(m.values.data(), m.rows(), 37, padded, dtype, normalize,
                       OverflowPolicy::error, single.data(), Device::cpu, 1);
      CHECK(out == single);
      CHECK(counts.flushed_to_zero == single_counts.flushed_to_zero);
      std::uint64_t flushed = 0;
      for (std::uint64_t r = 0; r < m.rows(); ++r) {
        const double norm = canonical_norm(m.row(r), 37);
        const std::byte* row = out.data() + r * padded * element;
        for (std::uint64_t i = 0; i < padded; ++i) {
          if (i >= 37) {
            for (std::size_t b = 0; b < element; ++b) CHECK(row[i * element + b] == std::byte{0});
            continue;
          }
          const float x = normalize ? float(double(m.row(r)[i]) / norm) : m.row(r)[i];
          if (dtype == DType::f32) {
            float value;
            std::memcpy(&value, row + i * 4, 4);
            CHECK(std::bit_cast<std::uint32_t>(value) == std::bit_cast<std::uint32_t>(x));
          } else {
            std::uint16_t value;
            std::memcpy(&value, row + i * 2, 2);
            const std::uint16_t expected =
                dtype == DType::f16 ? reference_f16(x) : reference_bf16(x);
            CHECK(value == expected);
            const float back = dtype == DType::f16 ? f16_value(value) : bf16_value(value);
            flushed += back == 0 && x != 0;
          }
        }
      }
      CHECK(counts.flushed_to_zero == flushed);
      CHECK(counts.overflowed == 0);
      if (dtype == DType::f16 && !normalize) CHECK(flushed >= 1);
    }
  }
  // Normalised rows have unit norm to f32 precision.
  std::vector<float> unit(m.values.size());
  convert_rows(m.values.data(), m.rows(), 37, 37, DType::f32, true, OverflowPolicy::error,
               reinterpret_cast<std::byte*>(unit.data()), Device::cpu);
  for (std::uint64_t r = 0; r < m.rows(); ++r)
    CHECK(naive_norm(unit.data() + r * 37, 37) == doctest::Approx(1.0).epsilon(1e-6));
  // A zero row is left as zeros rather than divided by zero.
  std::vector<float> zeros(8, 0.0f), zeros_out(8, 1.0f);
  convert_rows(zeros.data(), 1, 8, 8, DType::f32, true, OverflowPolicy::error,
               reinterpret_cast<std::byte*>(zeros_out.data()), Device::cpu);
  CHECK(zeros_out == zeros);
  CHECK_THROWS_AS(convert_rows(zeros.data(), 1, 8, 4, DType::f32, false, OverflowPolicy::error,
                               reinterpret_cast<std::byte*>(zeros_out.data()), Device::cpu),
                  Error);
  CHECK_THROWS_AS(RowConverter(ConversionOptions{.output_dtype = DType::i8}), Error);
}

TEST_CASE("batches: any order, no overlap, full coverage; results do not depend on threads") {
  Matrix m = random_matrix(900, 50, 21);
  std::memcpy(m.row(800), m.row(100), 50 * 4);
  for (std::uint64_t r = 0; r < 900; r += 11) m.row(r)[2] = kNan;
  ValidationOptions options;
  options.dedup = true;
  options.shuffle = true;
  options.seed = 5;
  options.device = Device::cpu;
  int fetches = 0;
  const auto fetch = fetcher_for({&m}, &fetches);

  Validator in_order(options, {50});
  check_rows(in_order, {&m}, 0, 900, 2);
  const auto expected = in_order.finish(fetch);

  options.threads = 1;
  Validator reversed(options, {50});
  check_rows(reversed, {&m}, 600, 300, 2);
  check_rows(reversed, {&m}, 300, 300, 2);
  check_rows(reversed, {&m}, 0, 300, 2);
  const auto result = reversed.finish(fetch);
  CHECK(result.rows == expected.rows);
  CHECK(result.rejects.size() == expected.rejects.size());
  CHECK(result.reasons == expected.reasons);
  CHECK(result.reasons[size_t(DropReason::duplicate)] == 1);

  Validator overlapping(options, {50});
  check_rows(overlapping, {&m}, 0, 300, 0);
  CHECK_THROWS_AS(check_rows(overlapping, {&m}, 299, 10, 0), Error);

  Validator gap(options, {50});
  check_rows(gap, {&m}, 0, 300, 0);
  check_rows(gap, {&m}, 400, 100, 0);
  CHECK_THROWS_AS(gap.finish(fetch), Error);
}

TEST_CASE("rows lying apart are checked where they lie, with the verdicts of a gathered batch") {
  // Dialogue columns with every kind of verdict; each row copied to a block of its own, in
  // reverse order, so no row is next to the one before it.
  Matrix q = random_matrix(700, 40, 31), a = random_matrix(700, 40, 32);
  std::memcpy(q.row(650), q.row(10), 40 * 4);
  std::memcpy(a.row(650), a.row(10), 40 * 4);
  for (std::uint64_t r = 0; r < 700; r += 13) q.row(r)[3] = kNan;
  for (std::uint64_t r = 5; r < 700; r += 17) std::fill_n(a.row(r), 40, 0.0f);
  for (std::uint64_t r = 7; r < 700; r += 19) a.row(r)[1] = 1e30f;
  std::vector<std::vector<float>> blocks(2 * 700);
  std::vector<const float*> q_rows(700), a_rows(700);
  for (std::uint64_t r = 700; r-- > 0;) {
    blocks[2 * r].assign(q.row(r), q.row(r) + 40);
    blocks[2 * r + 1].assign(a.row(r), a.row(r) + 40);
    q_rows[r] = blocks[2 * r].data();
    a_rows[r] = blocks[2 * r + 1].data();
  }
  ValidationOptions options;
  options.dedup = true;
  options.pair_cos_min = -0.5;
  options.device = Device::cpu;
  int fetches = 0;
  const auto fetch = fetcher_for({&q, &a}, &fetches);
  Validator gathered(options, {40, 40});
  check_rows(gathered, {&q, &a}, 0, 700, 0);
  const auto expected = gathered.finish(fetch);
  CHECK(expected.rejects.size() > 60);

  Validator apart(options, {40, 40});
  for (std::uint64_t first = 0; first < 700; first += 300) {
    const std::uint64_t count = std::min<std::uint64_t>(300, 700 - first);
    const float* const* columns[] = {q_rows.data() + first, a_rows.data() + first};
    apart.check_rows(columns, first, count, 0);
  }
  const auto result = apart.finish(fetch);
  CHECK(result.rows == expected.rows);
  CHECK(result.reasons == expected.reasons);
  REQUIRE(result.rejects.size() == expected.rejects.size());
  for (std::size_t i = 0; i < result.rejects.size(); ++i) {
    CHECK(result.rejects[i].row == expected.rejects[i].row);
    CHECK(result.rejects[i].reason == expected.rejects[i].reason);
  }
  Validator missing(options, {40, 40});
  q_rows[3] = nullptr;
  const float* const* columns[] = {q_rows.data(), a_rows.data()};
  CHECK_THROWS_AS(missing.check_rows(columns, 0, 10, 0), Error);
}

TEST_CASE("invalid options are refused") {
  const auto refuses = [](ValidationOptions options, std::vector<std::uint64_t> dims) {
    options.device = Device::cpu;
    CHECK_THROWS_AS(Validator(options, dims), Error);
  };
  refuses({.norm_min = -0.5}, {8});
  refuses({.norm_min = std::nan("")}, {8});
  refuses({.norm_max = 0.0}, {8});
  refuses({.norm_min = 0.0, .norm_max = 0.0}, {8});
  refuses({.norm_min = 2.0, .norm_max = 1.0}, {8});
  refuses({.norm_max = std::nan("")}, {8});
  refuses({.pair_cos_min = 0.5}, {8});      // one column
  refuses({.pair_cos_min = 0.5}, {8, 16});  // different dims
  refuses({.pair_cos_min = 0.5, .pair_cos_max = 0.1}, {8, 8});
  refuses({.output_dtype = DType::i32}, {8});
  refuses({.max_rows_per_source = 0}, {8});
  refuses({.sample_fraction = 0.0}, {8});
  refuses({.sample_fraction = 1.5}, {8});
  refuses({}, {});
  refuses({}, {8, 8, 8});
  refuses({}, {0});
  CHECK(drop_reason_name(DropReason::pair_cos) == "pair_cos");
  CHECK(parse_overflow_policy("clamp") == OverflowPolicy::clamp);
  CHECK_FALSE(parse_overflow_policy("wrap"));
}

TEST_CASE(
    "CPU conversion of in-range rows (the vectorised path) matches the shared rounding bit for "
    "bit") {
  std::mt19937 random(77);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  const std::uint64_t rows = 64, dim = 257;
  for (auto [dtype, output] : {std::pair{DType::f16, detail::OutputType::f16},
                               std::pair{DType::bf16, detail::OutputType::bf16}}) {
    std::vector<float> in(rows * dim);
    for (std::uint64_t r = 0; r < rows; ++r)
      for (std::uint64_t i = 0; i < dim; ++i) {
        float x;
        do {
          x = std::bit_cast<float>(any_bits(random));
          // f16: finite, |x| <= 65504 (random bit patterns give every exponent, so subnormal
          // results and flushes to zero are frequent); bf16: finite, not flushed to zero.
        } while (!std::isfinite(x) || (dtype == DType::f16 && std::fabs(x) > 65504.0f) ||
                 (dtype == DType::bf16 && (std::fabs(x) < 1e-37f || std::fabs(x) > 3.3e38f)));
        if (i % 50 == 0) x = (r % 2) ? -0.0f : 0.0f;
        in[r * dim + i] = x;
      }
    const std::uint64_t padded = 272;
    std::vector<std::uint16_t> out(rows * padded, 0xffff);
    const auto counts =
        convert_rows(in.data(), rows, dim, padded, dtype, false, OverflowPolicy::error,
                     reinterpret_cast<std::byte*>(out.data()), Device::cpu, 2);
    std::uint64_t flushed = 0;
    for (std::uint64_t r = 0; r < rows; ++r) {
      for (std::uint64_t i = 0; i < dim; ++i) {
        const auto want =
            detail::convert_bits(std::bit_cast<std::uint32_t>(in[r * dim + i]), output);
        REQUIRE(out[r * padded + i] == want.bits);
        flushed += want.flushed;
      }
      for (std::uint64_t i = dim; i < padded; ++i) REQUIRE(out[r * padded + i] == 0);
    }
    CHECK(counts.flushed_to_zero == flushed);
    if (dtype == DType::f16) CHECK(flushed > 0);
    CHECK(counts.overflowed == 0);
  }
}
