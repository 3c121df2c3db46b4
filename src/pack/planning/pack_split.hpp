// --split: which of several datasets each kept row goes to. The rule depends only on the row's
// place in the inputs, the fractions and the seed, never on the order rows are stored in or on
// the other rows, so the same inputs and options always give the same, disjoint and complete
// splits, and a row can be assigned without holding the others (docs/cli.md, "Splits").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpucache/pack.hpp"
#include "gpucache/validate.hpp"

namespace gpucache::detail {

class SplitRule {
 public:
  // Throws UsageError unless the names are unique column-style names and the fractions are
  // positive and add up to 1.
  SplitRule(std::vector<SplitSpec> splits, std::uint64_t seed);

  std::size_t count() const noexcept { return splits_.size(); }
  const SplitSpec& split(std::size_t index) const noexcept { return splits_[index]; }
  // The split of input row `global_row` (its index among all inputs' rows): a keyed 64-bit hash
  // of the row read as a fraction of 2^64, compared with the running sum of the fractions.
  std::size_t split_of(std::uint64_t global_row) const noexcept;
  // The kept rows of each split, each in the order of `rows`.
  // Reads `rows` window by window, releasing what it has read and written (both may live in
  // files: gpucache/common/spill_array.hpp); the parts share rows' spill policy.
  std::vector<RowList> assign(RowList& rows) const;

 private:
  std::vector<SplitSpec> splits_;
  std::vector<std::uint64_t> bounds_;  // split i takes hashes below bounds_[i]
  std::uint64_t seed_;
};

}  // namespace gpucache::detail
