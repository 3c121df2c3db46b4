// The drop-reason table: the one definition of why validation drops a row. Everything else reads
// it: the enum's storage codes (also used by the CUDA kernels and the CPU reference through
// kernels/row_checks.cuh), the names in `pack --json`, the manifest's "dropped" counts and the
// --rejects lines, the check order, and the one-line documentation shown by `pack --help` and
// verify --deep. docs/validation.md ("Checks and drop reasons") lists them for people.
//
// Plain C++17 with no CUDA header: nvcc compiles it as C++17 inside the kernels, g++ as C++20.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gpucache {

// Storage codes (the values stay put; they are stored nowhere on disk, but the CPU and GPU results
// are compared byte for byte). A new reason takes the next free code and a row in kDropReasons.
enum class DropReason : std::uint8_t {
  kept = 0,
  nan_inf = 1,
  norm_low = 2,
  norm_high = 3,
  zero = 4,
  duplicate = 5,
  pair_cos = 6,
  overflow = 7,
  null = 8,
};

struct DropReasonInfo {
  DropReason reason;      // its storage code; the table is indexed by it
  std::string_view name;  // spelled so in --json, manifest.json and --rejects lines
  // A row gets the first failing check: 1 is checked first. 0 for `kept`, which is no check.
  unsigned check_order;
  std::string_view doc;  // one line; option names as in the manifest's "validation" rules
};

// In storage-code order, which is also the order of the "dropped" keys in --json and manifest.json.
// The checks themselves are in row_verdict() (kernels/row_checks.cuh: nan_inf, zero, norm_low,
// norm_high, pair_cos), run_batch() (validate.cpp: null, from the rows the inputs report) and
// Validator::finish() (validate_finish.cpp: duplicate, overflow), each placed at its check_order;
// tests/test_validate.cpp checks that the order here is the one they apply.
inline constexpr DropReasonInfo kDropReasons[] = {
    {DropReason::kept, "kept", 0, "passed every check"},
    {DropReason::nan_inf, "nan_inf", 2, "a value is NaN or infinite"},
    {DropReason::norm_low, "norm_low", 4, "the L2 norm is below norm_min"},
    {DropReason::norm_high, "norm_high", 5, "the L2 norm is above norm_max"},
    {DropReason::zero, "zero", 3, "every value is +0 or -0"},
    {DropReason::duplicate, "duplicate", 7,
     "with dedup: byte-identical to an earlier kept row in some column"},
    {DropReason::pair_cos, "pair_cos", 6,
     "the question/answer cosine is outside [pair_cos_min, pair_cos_max]"},
    {DropReason::overflow, "overflow", 8,
     "a value overflows the output dtype and on_overflow is drop"},
    // First: a null row's values are placeholders (zeros), which no other check may judge.
    {DropReason::null, "null", 1,
     "a packed column holds a null (no value) in this row and on_null is drop"},
};
inline constexpr std::size_t kDropReasonCount = sizeof(kDropReasons) / sizeof(kDropReasons[0]);

// "kept", "nan_inf", ...; "unknown" for a code outside the table.
constexpr std::string_view drop_reason_name(DropReason reason) noexcept {
  const auto code = static_cast<std::size_t>(reason);
  return code < kDropReasonCount ? kDropReasons[code].name : std::string_view("unknown");
}
// The table row of a reason. Every DropReason has one; a code cast from outside the table gets
// kept's row rather than a read past its end.
constexpr const DropReasonInfo& drop_reason_info(DropReason reason) noexcept {
  const auto code = static_cast<std::size_t>(reason);
  return kDropReasons[code < kDropReasonCount ? code : 0];
}

// The reasons that drop a row (all but kept), first check first.
constexpr std::array<DropReason, kDropReasonCount - 1> drop_reasons_in_check_order() noexcept {
  std::array<DropReason, kDropReasonCount - 1> order{};
  for (std::size_t code = 1; code < kDropReasonCount; ++code)
    order[kDropReasons[code].check_order - 1] = kDropReasons[code].reason;
  return order;
}

// Checks of a drop-reason table: static_asserted on kDropReasons below, and tried on broken tables
// in tests/test_validate.cpp.
namespace detail {

constexpr bool same_text(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// Row i holds code i, so the table is indexed by code and kept (0) comes first.
template <std::size_t N>
constexpr bool drop_reason_codes_are_indices(const DropReasonInfo (&table)[N]) noexcept {
  for (std::size_t code = 0; code < N; ++code)
    if (static_cast<std::size_t>(table[code].reason) != code) return false;
  return true;
}

// Every row has a name and a doc line, and no two names are the same.
template <std::size_t N>
constexpr bool drop_reason_names_are_unique(const DropReasonInfo (&table)[N]) noexcept {
  for (std::size_t a = 0; a < N; ++a) {
    if (table[a].name.empty() || table[a].doc.empty()) return false;
    for (std::size_t b = a + 1; b < N; ++b)
      if (same_text(table[a].name, table[b].name)) return false;
  }
  return true;
}

// kept (row 0) has check_order 0 and the other rows are numbered 1..N-1, each once.
template <std::size_t N>
constexpr bool drop_reason_order_is_a_permutation(const DropReasonInfo (&table)[N]) noexcept {
  if (table[0].check_order != 0) return false;
  bool taken[N] = {};
  for (std::size_t code = 1; code < N; ++code) {
    const unsigned order = table[code].check_order;
    if (order == 0 || order >= N || taken[order]) return false;
    taken[order] = true;
  }
  return true;
}

}  // namespace detail

static_assert(kDropReasonCount <= 256, "a storage code is one byte");
static_assert(detail::drop_reason_codes_are_indices(kDropReasons),
              "kDropReasons must list every DropReason at the index of its code, from kept = 0");
static_assert(detail::drop_reason_names_are_unique(kDropReasons),
              "every drop reason needs a name and a doc line, and names must differ");
static_assert(detail::drop_reason_order_is_a_permutation(kDropReasons),
              "check_order must number the drop reasons 1..N-1, each once (kept is 0)");

}  // namespace gpucache
