// What a Validator remembers of each row's verdict between check_batch() and finish(): four bytes,
// one holding the drop reason's storage code (any code kDropReasons can hold), one of flags and
// two naming a column. Pack keeps one per input row, so it stays this small; everything reads
// and writes it through the named members below.
#pragma once

#include <cstdint>

#include "gpucache/drop_reason.hpp"

namespace gpucache::detail {

class RowStatus {
 public:
  // The most columns a Validator checks: the column takes two bytes.
  static constexpr unsigned kMaxColumns = 0xffff;

  RowStatus() = default;  // no batch has covered the row yet

  // The check pass's verdict: kept or a row-level reason with its failing column (the first pair
  // column for pair_cos); for a kept row, `overflows` says that storing it overflows, and
  // `column` is then the first column that does.
  static RowStatus checked(DropReason reason, unsigned column, bool overflows) {
    RowStatus status;
    status.reason_ = reason;
    status.flags_ = static_cast<std::uint8_t>(kSeen | (overflows ? kOverflows : 0));
    status.column_ = static_cast<std::uint16_t>(column);
    return status;
  }

  bool seen() const noexcept { return flags_ & kSeen; }
  // Provisional until finish() has decided duplicates and overflow drops.
  DropReason reason() const noexcept { return reason_; }
  // The failing column of a dropped row; of a kept row that overflows, the first column that does.
  unsigned column() const noexcept { return column_; }
  // Passed every check so far (sampling may still leave it out).
  bool valid() const noexcept { return reason_ == DropReason::kept; }
  // Kept and not sampled out: the row is stored.
  bool stored() const noexcept { return valid() && !sampled_out(); }
  // Passed the row-level checks, and storing column() overflows its storage type.
  bool overflows() const noexcept { return flags_ & kOverflows; }
  bool sampled_out() const noexcept { return flags_ & kSampledOut; }

  // A later verdict (duplicate, overflow) replaces the reason and column; the flags stay.
  void drop(DropReason reason, unsigned column) noexcept {
    reason_ = reason;
    column_ = static_cast<std::uint16_t>(column);
  }
  void sample_out() noexcept { flags_ |= kSampledOut; }

 private:
  static constexpr std::uint8_t kOverflows = 0x01;   // storing the row overflows column_
  static constexpr std::uint8_t kSampledOut = 0x02;  // valid, but left out by sampling
  static constexpr std::uint8_t kSeen = 0x04;        // a batch covered this row

  DropReason reason_ = DropReason::kept;
  std::uint8_t flags_ = 0;
  std::uint16_t column_ = 0;
};
static_assert(sizeof(RowStatus) == 4, "pack keeps one RowStatus per input row");

}  // namespace gpucache::detail
