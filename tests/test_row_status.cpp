// The per-row status a Validator keeps between its passes: every reason code, column and flag goes
// in and comes back out unchanged, and a later verdict changes only what it should.
#include <doctest/doctest.h>

#include "row_status.hpp"

using namespace gpucache;
using detail::RowStatus;

static_assert(sizeof(RowStatus) == 4);

namespace {

// Columns at the edges of each byte of the two-byte column, and the largest.
constexpr unsigned kColumns[] = {0, 1, 2, 255, 256, 257, 4095, 65534, RowStatus::kMaxColumns};

}  // namespace

TEST_CASE("a new row status is unseen and kept") {
  const RowStatus status;
  CHECK_FALSE(status.seen());
  CHECK(status.reason() == DropReason::kept);
  CHECK(status.valid());
  CHECK(status.stored());
  CHECK_FALSE(status.overflows());
  CHECK_FALSE(status.sampled_out());
}

TEST_CASE("every reason code, column and flag round-trips") {
  // All 256 codes, not only today's reasons: the reason has a byte of its own.
  unsigned combinations = 0, mismatches = 0;
  for (unsigned code = 0; code < 256; ++code)
    for (const unsigned column : kColumns)
      for (const bool overflows : {false, true})
        for (const bool sampled : {false, true}) {
          ++combinations;
          const auto reason = static_cast<DropReason>(code);
          RowStatus status = RowStatus::checked(reason, column, overflows);
          if (sampled) status.sample_out();
          const bool kept = reason == DropReason::kept;
          const bool ok = status.seen() && status.reason() == reason && status.column() == column &&
                          status.overflows() == overflows && status.sampled_out() == sampled &&
                          status.valid() == kept && status.stored() == (kept && !sampled);
          if (!ok) {
            ++mismatches;
            CAPTURE(code);
            CAPTURE(column);
            CAPTURE(overflows);
            CAPTURE(sampled);
            CHECK(ok);
          }
        }
  CHECK(combinations == 256 * std::size(kColumns) * 2 * 2);
  CHECK(mismatches == 0);
}

TEST_CASE("a later verdict replaces the reason and column and keeps the flags") {
  for (const auto& before : kDropReasons)
    for (const auto& after : kDropReasons)
      for (const unsigned column : kColumns)
        for (const bool overflows : {false, true})
          for (const bool sampled : {false, true}) {
            CAPTURE(before.name);
            CAPTURE(after.name);
            CAPTURE(column);
            CAPTURE(overflows);
            RowStatus status =
                RowStatus::checked(before.reason, RowStatus::kMaxColumns - column, overflows);
            if (sampled) status.sample_out();
            status.drop(after.reason, column);
            CHECK(status.reason() == after.reason);
            CHECK(status.column() == column);
            CHECK(status.overflows() == overflows);
            CHECK(status.sampled_out() == sampled);
            CHECK(status.seen());
          }
}
