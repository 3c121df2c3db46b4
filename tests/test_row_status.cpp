// The per-row status a Validator keeps between its passes: every reason code, failing column and
// flag goes in and comes back out unchanged, and a later verdict changes only what it should.
#include <doctest/doctest.h>

#include "row_status.hpp"

using namespace gpucache;
using detail::RowStatus;

static_assert(sizeof(RowStatus) == 2);

TEST_CASE("a new row status is unseen and kept") {
  const RowStatus status;
  CHECK_FALSE(status.seen());
  CHECK(status.reason() == DropReason::kept);
  CHECK(status.valid());
  CHECK(status.stored());
  CHECK(status.overflow_columns() == 0);
  CHECK_FALSE(status.sampled_out());
}

TEST_CASE("every reason code, column and flag round-trips") {
  // All 256 codes, not only today's reasons: the reason has a byte of its own.
  constexpr unsigned kOverflowSets = 1u << detail::kMaxColumns;
  unsigned combinations = 0, mismatches = 0;
  for (unsigned code = 0; code < 256; ++code)
    for (unsigned column = 0; column < detail::kMaxColumns; ++column)
      for (unsigned overflow = 0; overflow < kOverflowSets; ++overflow)
        for (const bool sampled : {false, true}) {
          ++combinations;
          const auto reason = static_cast<DropReason>(code);
          RowStatus status = RowStatus::checked(reason, column, overflow);
          if (sampled) status.sample_out();
          const bool kept = reason == DropReason::kept;
          const bool ok =
              status.seen() && status.reason() == reason && status.failing_column() == column &&
              status.overflow_columns() == overflow && status.sampled_out() == sampled &&
              status.valid() == kept && status.stored() == (kept && !sampled) &&
              (overflow == 0 || status.first_overflow_column() == ((overflow & 1u) ? 0u : 1u));
          if (!ok) {
            ++mismatches;
            CAPTURE(code);
            CAPTURE(column);
            CAPTURE(overflow);
            CAPTURE(sampled);
            CHECK(ok);
          }
        }
  CHECK(combinations == 256 * detail::kMaxColumns * kOverflowSets * 2);
  CHECK(mismatches == 0);
}

TEST_CASE("a later verdict replaces the reason and column and keeps the flags") {
  constexpr unsigned kOverflowSets = 1u << detail::kMaxColumns;
  for (const auto& before : kDropReasons)
    for (const auto& after : kDropReasons)
      for (unsigned column = 0; column < detail::kMaxColumns; ++column)
        for (unsigned overflow = 0; overflow < kOverflowSets; ++overflow)
          for (const bool sampled : {false, true}) {
            CAPTURE(before.name);
            CAPTURE(after.name);
            CAPTURE(column);
            CAPTURE(overflow);
            RowStatus status = RowStatus::checked(before.reason, 1 - column, overflow);
            if (sampled) status.sample_out();
            status.drop(after.reason, column);
            CHECK(status.reason() == after.reason);
            CHECK(status.failing_column() == column);
            CHECK(status.overflow_columns() == overflow);
            CHECK(status.sampled_out() == sampled);
            CHECK(status.seen());
          }
}
