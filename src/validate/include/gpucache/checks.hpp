// The check table: the one definition of the checks validation can run on a column, the drop
// reasons each one produces and the order they run in. Everything else reads it: the names in
// --checks, manifest.json and `inspect`, the per-column verdicts of the CPU reference and the CUDA
// backend (validate.cpp folds them in this order), the defaults by column role, and the one-line
// documentation `pack --help` prints. docs/validation.md ("Checks") lists them for people.
//
// Plain C++17 with no CUDA header, like drop_reason.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpucache/column.hpp"
#include "gpucache/drop_reason.hpp"
#include "gpucache/dtype.hpp"

namespace gpucache {

// Indices into kChecks, which lists them in check order. Stored nowhere as numbers: the manifest
// spells checks by name.
enum class Check : std::uint8_t {
  null = 0,
  finite = 1,
  nonzero = 2,
  norm = 3,
  pair_cos = 4,
  dedup = 5,
  overflow = 6,
};

struct CheckInfo {
  Check check;            // its index in the table
  std::string_view name;  // spelled so in --checks, manifest.json and `inspect`
  // The reasons it drops a row with, in check order; `kept` fills the unused places.
  std::array<DropReason, 2> reasons;
  // Named in --checks. overflow and null are not: every column stored as f16 or bf16 has the
  // first, every packed column the second, and on_overflow (--on-overflow) and on_null
  // (--on-null) say what they do.
  bool selectable;
  std::string_view doc;  // one line
};

// In check order: a row is dropped with the first check it fails, every column (in column order)
// being tried for one check before the next check. The reasons in table order are exactly the
// drop-reason table's check order (static_asserted below).
inline constexpr CheckInfo kChecks[] = {
    {Check::null,
     "null",
     {DropReason::null, DropReason::kept},
     false,
     "holds a value, not a null (every packed column of any kind; on_null decides)"},
    {Check::finite,
     "finite",
     {DropReason::nan_inf, DropReason::kept},
     true,
     "every value is finite (no NaN, no infinity)"},
    {Check::nonzero,
     "nonzero",
     {DropReason::zero, DropReason::kept},
     true,
     "some value is not +0 or -0"},
    {Check::norm,
     "norm",
     {DropReason::norm_low, DropReason::norm_high},
     true,
     "the L2 norm is within [norm_min, norm_max]"},
    {Check::pair_cos,
     "pair_cos",
     {DropReason::pair_cos, DropReason::kept},
     true,
     "the cosine of the two pair_cos columns is within [pair_cos_min, pair_cos_max]"},
    {Check::dedup,
     "dedup",
     {DropReason::duplicate, DropReason::kept},
     true,
     "not byte-identical to the same column of an earlier kept row"},
    {Check::overflow,
     "overflow",
     {DropReason::overflow, DropReason::kept},
     false,
     "stored as f16/bf16 without overflowing (every such column; on_overflow decides)"},
};
inline constexpr std::size_t kCheckCount = sizeof(kChecks) / sizeof(kChecks[0]);

constexpr const CheckInfo& check_info(Check check) noexcept {
  return kChecks[static_cast<std::size_t>(check)];
}
constexpr std::string_view check_name(Check check) noexcept {
  return check_info(check).name;
}
// A selectable check by name ("finite", "norm", ...); nullopt for anything else.
std::optional<Check> parse_check(std::string_view name) noexcept;

// A set of checks, one bit each.
class CheckSet {
 public:
  constexpr CheckSet() = default;
  constexpr CheckSet(std::initializer_list<Check> checks) {
    for (Check check : checks) add(check);
  }
  constexpr bool has(Check check) const noexcept { return bits_ & bit(check); }
  constexpr void add(Check check) noexcept {
    bits_ = static_cast<std::uint8_t>(bits_ | bit(check));
  }
  constexpr void remove(Check check) noexcept {
    bits_ = static_cast<std::uint8_t>(bits_ & ~bit(check));
  }
  constexpr bool empty() const noexcept { return bits_ == 0; }
  constexpr bool operator==(const CheckSet&) const = default;

 private:
  static constexpr std::uint8_t bit(Check check) noexcept {
    return static_cast<std::uint8_t>(1u << static_cast<unsigned>(check));
  }
  std::uint8_t bits_ = 0;
};
static_assert(kCheckCount <= 8, "CheckSet holds one byte: widen it");

// "finite, nonzero, norm" in table order; "none" for an empty set.
std::string describe_checks(CheckSet checks);

// The checks of one column and their bounds: what pack records in the manifest per column and
// verify --deep re-checks (docs/validation.md, "Checks").
struct ColumnChecks {
  std::string column;  // the column's name
  CheckSet checks;     // selectable checks only (overflow is not listed)
  // With the norm check: inclusive bounds on the L2 norm, 0 <= norm_min <= norm_max, 0 < norm_max.
  // norm_min 0 is no lower bound and norm_max infinity no upper bound.
  double norm_min = 0.1;
  double norm_max = 100.0;
  // Stored at unit L2 norm (--normalize on an embedding column): verify --deep expects norm 1.
  bool normalized = false;

  // The bounds count only with the norm check.
  bool operator==(const ColumnChecks& other) const {
    return column == other.column && checks == other.checks && normalized == other.normalized &&
           (!checks.has(Check::norm) || (norm_min == other.norm_min && norm_max == other.norm_max));
  }
};

// The checks a column gets unless --checks names it (docs/validation.md, "Defaults by role"):
// an embedding gets finite, nonzero and norm (and dedup when `dedup`); a tensor column of a float
// dtype gets finite; integer and bool tensors, sequences and text get none. Pack adds pair_cos to
// the dialogue pair when pair bounds are set.
CheckSet default_checks(ColumnRole role, DType dtype, bool dedup) noexcept;

// Why a column of this role and dtype cannot have `check` ("norm needs float values; 'labels' is
// i64"), or an empty string when it can. Every check reads float tensor rows (f16, bf16, f32,
// f64): sequences, text, integer and bool columns can have none.
std::string check_refusal(Check check, const std::string& column, ColumnRole role, DType dtype);

// --checks COLUMN=CHECK,CHECK,... as typed: which checks replace the column's defaults. A norm
// check may carry its own bounds, norm:MIN:MAX (either may be empty for the dataset-wide bound,
// MAX may be inf); "none" is the empty set.
struct ChecksSpec {
  std::string column;
  CheckSet checks;
  std::optional<double> norm_min, norm_max;

  bool operator==(const ChecksSpec&) const = default;
};
// Throws gpucache::UsageError with a one-line message for a missing '=', an unknown check (the
// message lists the known ones), a repeated check, "none" beside a check, or bad bounds.
ChecksSpec parse_checks_spec(std::string_view text);

namespace detail {

// The reasons of a check table in table order, skipping `kept`.
template <std::size_t N>
constexpr bool check_reasons_follow_check_order(const CheckInfo (&table)[N]) noexcept {
  const auto order = drop_reasons_in_check_order();
  std::size_t next = 0;
  for (std::size_t i = 0; i < N; ++i)
    for (const DropReason reason : table[i].reasons) {
      if (reason == DropReason::kept) continue;
      if (next >= order.size() || order[next] != reason) return false;
      ++next;
    }
  return next == order.size();
}

// Row i holds check i, and names are set, documented and unique.
template <std::size_t N>
constexpr bool checks_are_indexed_and_named(const CheckInfo (&table)[N]) noexcept {
  for (std::size_t i = 0; i < N; ++i) {
    if (static_cast<std::size_t>(table[i].check) != i) return false;
    if (table[i].name.empty() || table[i].doc.empty()) return false;
    for (std::size_t j = i + 1; j < N; ++j)
      if (same_text(table[i].name, table[j].name)) return false;
  }
  return true;
}

}  // namespace detail

static_assert(detail::checks_are_indexed_and_named(kChecks),
              "kChecks must list every Check at its index, each with a unique name and a doc line");
static_assert(
    detail::check_reasons_follow_check_order(kChecks),
    "the reasons of kChecks, in table order, must be the drop-reason table's check order, "
    "each once");

}  // namespace gpucache
