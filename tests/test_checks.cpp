// The check table (gpucache/checks.hpp): names, defaults by role, refusals, --checks parsing, and
// a Validator running any number of columns of any float dtype, each with its own checks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gpucache/checks.hpp"
#include "gpucache/common/float_convert.hpp"
#include "gpucache/error.hpp"
#include "gpucache/validate.hpp"

using namespace gpucache;

TEST_CASE("the check table: names, reasons, what --checks takes") {
  CHECK(kCheckCount == 7);
  for (const CheckInfo& info : kChecks) {
    CAPTURE(info.name);
    CHECK(check_name(info.check) == info.name);
    CHECK(parse_check(info.name) == (info.selectable ? std::optional(info.check) : std::nullopt));
  }
  CHECK(check_info(Check::norm).reasons[0] == DropReason::norm_low);
  CHECK(check_info(Check::norm).reasons[1] == DropReason::norm_high);
  CHECK(check_info(Check::finite).reasons[0] == DropReason::nan_inf);
  CHECK_FALSE(parse_check("sharp"));
  CHECK_FALSE(parse_check("overflow"));  // every f16/bf16 column has it; --on-overflow decides
  CHECK_FALSE(parse_check("null"));      // every packed column has it; --on-null decides
  CHECK(check_info(Check::null).reasons[0] == DropReason::null);
  CHECK_THROWS_WITH_AS(parse_checks_spec("a=null"), doctest::Contains("--on-null"), UsageError);
  CHECK(describe_checks({}) == "none");
  CHECK(describe_checks({Check::dedup, Check::finite, Check::norm}) == "finite, norm, dedup");
}

TEST_CASE("default checks by role and dtype") {
  const CheckSet embedding{Check::finite, Check::nonzero, Check::norm};
  CHECK(default_checks(ColumnRole::embedding, DType::f32, false) == embedding);
  CHECK(default_checks(ColumnRole::embedding, DType::f16, true) ==
        CheckSet{Check::finite, Check::nonzero, Check::norm, Check::dedup});
  CHECK(default_checks(ColumnRole::tensor, DType::f32, true) == CheckSet{Check::finite});
  CHECK(default_checks(ColumnRole::tensor, DType::bf16, false) == CheckSet{Check::finite});
  CHECK(default_checks(ColumnRole::tensor, DType::i64, false).empty());
  CHECK(default_checks(ColumnRole::tensor, DType::u8, false).empty());
  CHECK(default_checks(ColumnRole::sequence, DType::i32, false).empty());
  CHECK(default_checks(ColumnRole::text, DType::u8, false).empty());

  CHECK(check_refusal(Check::norm, "w", ColumnRole::tensor, DType::f32).empty());
  CHECK(check_refusal(Check::norm, "labels", ColumnRole::tensor, DType::i64).find("i64") !=
        std::string::npos);
  CHECK(check_refusal(Check::finite, "tokens", ColumnRole::sequence, DType::i32).find("sequence") !=
        std::string::npos);
  CHECK_FALSE(check_refusal(Check::overflow, "w", ColumnRole::tensor, DType::f32).empty());
}

TEST_CASE("--checks COLUMN=CHECK,... parsing") {
  const auto spec = parse_checks_spec("weights=finite,norm");
  CHECK(spec.column == "weights");
  CHECK(spec.checks == CheckSet{Check::finite, Check::norm});
  CHECK_FALSE(spec.norm_min);
  CHECK_FALSE(spec.norm_max);
  CHECK(parse_checks_spec("a=none").checks.empty());
  CHECK_THROWS_AS(parse_checks_spec("a=b=finite"), UsageError);  // the first = splits
  const auto bounded = parse_checks_spec("emb=norm:0:inf,dedup");
  CHECK(bounded.checks == CheckSet{Check::norm, Check::dedup});
  CHECK(bounded.norm_min == 0.0);
  CHECK(bounded.norm_max == std::numeric_limits<double>::infinity());
  const auto low_only = parse_checks_spec("emb=norm:0.5:");
  CHECK(low_only.norm_min == 0.5);
  CHECK_FALSE(low_only.norm_max);
  for (const char* bad :
       {"weights", "=finite", "w=", "w=sharp", "w=overflow", "w=finite,finite", "w=none,finite",
        "w=finite:1:2", "w=norm:1", "w=norm:x:2", "w=norm:1:nan"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_checks_spec(bad), UsageError);
  }
  CHECK_THROWS_WITH(parse_checks_spec("w=sharp"),
                    doctest::Contains("finite, nonzero, norm, pair_cos, dedup"));
}

namespace {

// f16 or bf16 bits of values that are exact in it (the f16 rows here hold only 0.5 and NaN; bf16
// keeps an f32's top 16 bits, which for these values is a nearby nonzero value).
std::vector<std::uint16_t> to_half(const std::vector<float>& values, DType dtype) {
  std::vector<std::uint16_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    if (dtype == DType::bf16)
      out[i] = static_cast<std::uint16_t>(bits >> 16);
    else
      out[i] = std::isnan(values[i]) ? 0x7e00 : values[i] == 0.5f ? 0x3800 : 0xffff;
    REQUIRE(out[i] != 0xffff);
  }
  return out;
}

std::vector<float> widened(const std::vector<std::uint16_t>& values, DType dtype) {
  std::vector<float> out(values.size());
  detail::widen_to_f32(dtype, reinterpret_cast<const std::byte*>(values.data()), out.data(),
                       out.size());
  return out;
}

}  // namespace

TEST_CASE("N columns of any float dtype, each with its own checks; a row fails in any column") {
  constexpr std::uint64_t kRows = 12;
  // Five columns: f32 [4] embedding, f16 [3] tensor (finite), bf16 [2] tensor (norm, open bounds),
  // f64 [5] embedding (norm within [1, 10]), f32 [1] weight without checks.
  std::vector<float> a(kRows * 4, 1.0f), b(kRows * 3, 0.5f), c(kRows * 2, 0.0f), e(kRows, 1e-9f);
  std::vector<double> d(kRows * 5, 1.0);
  a[2 * 4 + 1] = std::numeric_limits<float>::infinity();  // row 2: nan_inf in column 0
  b[3 * 3 + 2] = std::nanf("");                           // row 3: nan_inf in column 1
  for (int i = 0; i < 5; ++i) d[5 * 5 + i] = 100.0;       // row 5: norm_high in column 3
  for (int i = 0; i < 4; ++i) a[6 * 4 + i] = 0.0f;        // row 6: zero in column 0 ...
  for (int i = 0; i < 5; ++i) d[6 * 5 + i] = 0.0;         // ... and in column 3: column 0 named
  b[7 * 3] = std::nanf("");                               // row 7: nan_inf (column 1) wins over
  for (int i = 0; i < 5; ++i) d[7 * 5 + i] = 0.01;        // norm_low (column 3), check order
  c[8 * 2] = 1e-30f;                                      // row 8: tiny norm, no lower bound
  e[9] = std::nanf("");                                   // row 9: no checks on column 4

  ValidationOptions options;
  options.device = Device::cpu;
  options.columns =
      std::vector<ColumnChecks>{{"a", {Check::finite, Check::nonzero, Check::norm}, 0.1, 100.0},
                                {"b", {Check::finite}},
                                {"c", {Check::norm}, 0.0, std::numeric_limits<double>::infinity()},
                                {"d", {Check::finite, Check::nonzero, Check::norm}, 1.0, 10.0},
                                {"e", {}}};
  const std::vector<ColumnLayout> layouts{ColumnLayout(4), ColumnLayout(3), ColumnLayout(2),
                                          ColumnLayout(5), ColumnLayout(1)};
  const auto b16 = to_half(b, DType::f16), c16 = to_half(c, DType::bf16);
  Validator validator(options, layouts);
  const std::vector<ColumnBatch> batch{{a.data(), DType::f32},
                                       {b16.data(), DType::f16},
                                       {c16.data(), DType::bf16},
                                       {d.data(), DType::f64},
                                       {e.data(), DType::f32}};
  validator.check_batch(batch, 0, kRows, 0);
  const auto result = validator.finish([](std::uint64_t, std::size_t, std::span<float>) {});

  struct Expected {
    std::uint64_t row;
    DropReason reason;
    std::uint32_t column;
  };
  const std::vector<Expected> expected{{2, DropReason::nan_inf, 0},
                                       {3, DropReason::nan_inf, 1},
                                       {5, DropReason::norm_high, 3},
                                       {6, DropReason::zero, 0},
                                       {7, DropReason::nan_inf, 1}};
  REQUIRE(result.rejects.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(result.rejects[i].row == expected[i].row);
    CHECK(result.rejects[i].reason == expected[i].reason);
    CHECK(result.rejects[i].column == expected[i].column);
  }
  CHECK(result.rows.size() == kRows - expected.size());
  // Norm statistics for the three columns with the norm check, in column order.
  REQUIRE(result.norms.size() == 3);
  CHECK(result.norms[0].column == 0);
  CHECK(result.norms[1].column == 2);
  CHECK(result.norms[2].column == 3);
  CHECK(result.norms[2].max == doctest::Approx(std::sqrt(5.0)));

  // The same rows as f32 lying apart give the same verdicts.
  const std::vector<float> b32 = widened(b16, DType::f16), c32 = widened(c16, DType::bf16);
  const std::vector<float> d32(d.begin(), d.end());
  Validator apart(options, layouts);
  std::vector<std::vector<const void*>> pointers(5);
  const float* bases[] = {a.data(), b32.data(), c32.data(), d32.data(), e.data()};
  std::vector<ColumnRowPointers> columns;
  for (std::size_t k = 0; k < 5; ++k) {
    for (std::uint64_t r = 0; r < kRows; ++r)
      pointers[k].push_back(bases[k] + r * layouts[k].values);
    columns.push_back({pointers[k].data(), DType::f32});
  }
  apart.check_rows(columns, 0, kRows, 0);
  const auto again = apart.finish([](std::uint64_t, std::size_t, std::span<float>) {});
  CHECK(again.rows == result.rows);
  CHECK(again.reasons == result.reasons);
}

TEST_CASE("a column with no checks is still checked for overflow when stored as f16") {
  ValidationOptions options;
  options.device = Device::cpu;
  options.on_overflow = OverflowPolicy::drop;
  options.columns = std::vector<ColumnChecks>{{"w", {}}};
  const std::vector<ColumnLayout> layouts{ColumnLayout(2, DType::f16)};
  const std::vector<float> rows{1.0f, 2.0f, 70000.0f, 1.0f, std::nanf(""), 0.0f};
  Validator validator(options, layouts);
  const std::vector<ColumnBatch> batch{{rows.data(), DType::f32}};
  validator.check_batch(batch, 0, 3, 0);
  const auto result = validator.finish([](std::uint64_t, std::size_t, std::span<float>) {});
  CHECK(result.rows == std::vector<std::uint64_t>{0, 2});  // the NaN row is not checked
  REQUIRE(result.rejects.size() == 1);
  CHECK(result.rejects[0].reason == DropReason::overflow);

  // Bad rules are refused when the Validator is made.
  ValidationOptions negative = options;
  negative.columns = std::vector<ColumnChecks>{{"w", {Check::norm}, -1.0, 2.0}};
  CHECK_THROWS_AS(Validator(negative, layouts), Error);
  ValidationOptions mismatched = options;
  mismatched.columns->push_back({"x", {}});
  CHECK_THROWS_AS(Validator(mismatched, layouts), Error);
}
