// What a Validator remembers of each row's verdict between check_batch() and finish(): two bytes,
// one holding the drop reason's storage code (any code kDropReasons can hold) and one of flags.
// Pack keeps one per input row, so it stays this small; everything reads and writes it through
// the named members below.
#pragma once

#include <cstdint>

#include "gpucache/drop_reason.hpp"
#include "kernels/row_checks.cuh"

namespace gpucache::detail {

class RowStatus {
 public:
  RowStatus() = default;  // no batch has covered the row yet

  // The check pass's verdict: kept or a row-level reason, the failing column (0 when kept or
  // pair_cos), and bit c set when converting column c would overflow.
  static RowStatus checked(DropReason reason, unsigned failing_column, unsigned overflow_columns) {
    RowStatus status;
    status.reason_ = reason;
    status.flags_ =
        static_cast<std::uint8_t>(kSeen | (failing_column ? kColumn1 : 0) |
                                  ((overflow_columns << kOverflowShift) & kOverflowMask));
    return status;
  }

  bool seen() const noexcept { return flags_ & kSeen; }
  // Provisional until finish() has decided duplicates and overflow drops.
  DropReason reason() const noexcept { return reason_; }
  unsigned failing_column() const noexcept { return (flags_ & kColumn1) ? 1 : 0; }
  // Passed every check so far (sampling may still leave it out).
  bool valid() const noexcept { return reason_ == DropReason::kept; }
  // Kept and not sampled out: the row is stored.
  bool stored() const noexcept { return valid() && !sampled_out(); }
  // Bit c: converting column c overflows the output dtype.
  unsigned overflow_columns() const noexcept { return (flags_ & kOverflowMask) >> kOverflowShift; }
  // The first column that overflows (meaningful when overflow_columns() != 0).
  unsigned first_overflow_column() const noexcept { return (overflow_columns() & 1u) ? 0 : 1; }
  bool sampled_out() const noexcept { return flags_ & kSampledOut; }

  // A later verdict (duplicate, overflow) replaces the reason and failing column; the other flags
  // stay.
  void drop(DropReason reason, unsigned column) noexcept {
    reason_ = reason;
    flags_ = static_cast<std::uint8_t>((flags_ & ~kColumn1) | (column ? kColumn1 : 0));
  }
  void sample_out() noexcept { flags_ |= kSampledOut; }

 private:
  static_assert(kMaxColumns <= 2, "the failing column takes one flag bit: widen kColumn1");
  static constexpr std::uint8_t kColumn1 = 0x01;  // the failing column is column 1
  static constexpr unsigned kOverflowShift = 1;   // then one bit per column
  static constexpr std::uint8_t kOverflowMask = ((1u << kMaxColumns) - 1u) << kOverflowShift;
  static constexpr std::uint8_t kSampledOut = 0x08;  // valid, but left out by sampling
  static constexpr std::uint8_t kSeen = 0x10;        // a batch covered this row
  static_assert((kOverflowMask & (kColumn1 | kSampledOut | kSeen)) == 0, "flag bits overlap");

  DropReason reason_ = DropReason::kept;
  std::uint8_t flags_ = 0;
};
static_assert(sizeof(RowStatus) == 2, "pack keeps one RowStatus per input row");

}  // namespace gpucache::detail
