// --split-by COLUMN: one dataset per distinct value of a packed text or integer column, the split a
// table already holds (a `split` column of train/val/test rows), where --split (pack_split.hpp)
// draws one by fractions. The rules (docs/cli.md, "Splits"):
// - the column is a packed one and stays in every split's dataset: nothing is lost;
// - its rows hold one text or integer value each; a float, bool, date or time, sequence or
//   multi-value column is an error naming it;
// - each value's dataset is OUT/<split_directory_name(value)>; two values with the same name,
//   or more than kMaxSplitValues values, are errors that come before validation runs;
// - a row null in the column is dropped with the reason `null` (or refused with --on-null
//   error) like a null in any packed column; it belongs to no split;
// - a value none of whose rows is kept gets no dataset (its rows are counted as dropped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpucache/validate.hpp"
#include "pack_inputs.hpp"

namespace gpucache::detail {

// The most distinct values --split-by takes. Each becomes a dataset of its own; a column with
// more (an id, a free-text field) is almost surely not a split column, and a typo there would
// otherwise make thousands of directories.
inline constexpr std::size_t kMaxSplitValues = 256;
// The longest directory name a value gets, in bytes; a longer value is cut (and reported).
inline constexpr std::size_t kMaxSplitNameBytes = 128;

// A value's directory name, legal on every common file system: ASCII letters, digits, '-', '_'
// and '.' are kept, every other character (one UTF-8 sequence) becomes '_'; a name starting
// with '.' gets a '_' in front ("." and ".." and hidden names); the empty value is "_"; the
// result is cut to kMaxSplitNameBytes.
std::string split_directory_name(std::string_view value);

struct SplitValue {
  std::string value;  // the text, or the integer in decimal
  std::string name;   // its directory under the output directory
};

class SplitByColumn {
 public:
  // Reads the column's value of every input row that is not null in it. Throws UsageError when
  // no packed column has that name, Error naming the input and column when its kind cannot split
  // or it holds too many values, or two values share a directory name.
  SplitByColumn(const PackInputs& inputs, std::string column);

  const std::string& column() const noexcept { return name_; }
  bool integer() const noexcept { return integer_; }
  // Every value, in ascending order (integers by number, text by UTF-8 bytes).
  const std::vector<SplitValue>& values() const noexcept { return values_; }
  // The rows of `rows` per value (indexed as values()), each in the order of `rows`. Reads
  // `rows` window by window and releases it, as SplitRule::assign does. Every row must hold one
  // of the values (kept rows do: a row null in the column is never kept).
  std::vector<RowList> assign(RowList& rows, const PackInputs& inputs) const;

 private:
  // Calls visit(global_row, value) for rows [first, first + count) of one input.
  template <typename Visit>
  void for_each_value(const PackInputs& inputs, std::uint64_t first, std::uint64_t count,
                      Visit&& visit) const;

  std::string name_;
  std::size_t column_ = 0;
  bool integer_ = false;
  std::vector<SplitValue> values_;
  std::unordered_map<std::string, std::size_t> index_;  // value -> index in values_
};

}  // namespace gpucache::detail
