#include "pack_split_by.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/error.hpp"

namespace gpucache::detail {
namespace {

// Integer dtypes by the dtype table's numpy kind ('i', 'u'; bool is 'b').
bool integer_dtype(DType dtype) noexcept {
  const DTypeInfo* info = dtype_info(dtype);
  return info != nullptr && (info->numpy_kind == 'i' || info->numpy_kind == 'u');
}

// One little-endian integer of `dtype` in decimal: its bytes into the low end of a u64 (the shard
// format and every host gpucache builds for are little-endian), sign-extended when signed.
std::string integer_text(const std::byte* at, DType dtype) {
  const DTypeInfo& info = *dtype_info(dtype);
  std::uint64_t bits = 0;
  std::memcpy(&bits, at, info.size);
  if (info.numpy_kind == 'u') return std::to_string(bits);
  const unsigned shift = 64 - 8 * static_cast<unsigned>(info.size);
  return std::to_string(static_cast<std::int64_t>(bits << shift) >> shift);
}

// Decimal integers by number: negatives first, then by length (no leading zeros), then digits.
bool integer_less(const std::string& a, const std::string& b) {
  const bool a_negative = a.starts_with('-'), b_negative = b.starts_with('-');
  if (a_negative != b_negative) return a_negative;
  if (a.size() != b.size()) return a_negative ? a.size() > b.size() : a.size() < b.size();
  return a_negative ? a > b : a < b;
}

// Why a column cannot split, or empty when it can.
std::string kind_refusal(const InputColumn& column) {
  if (column.kind == ColumnKind::text) return "";
  if (column.kind == ColumnKind::sequence) return "holds a sequence of values per row";
  if (column.row_elements() != 1)
    return "holds " + std::to_string(column.row_elements()) + " values per row";
  // Dates and times are i64 with a meaning (input_column.hpp): no split names.
  if (column.time) return "holds " + describe_time(*column.time) + " values";
  if (integer_dtype(column.dtype)) return "";
  return "holds " + std::string(dtype_name(column.dtype)) + " values";
}

}  // namespace

std::string split_directory_name(std::string_view value) {
  std::string name;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    const bool kept = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.';
    if (kept) {
      name += static_cast<char>(c);
      continue;
    }
    name += '_';
    // One '_' for a whole UTF-8 sequence: skip its continuation bytes.
    while (c >= 0xC0 && i + 1 < value.size() &&
           (static_cast<unsigned char>(value[i + 1]) & 0xC0) == 0x80)
      ++i;
  }
  if (name.empty() || name.front() == '.') name.insert(name.begin(), '_');
  if (name.size() > kMaxSplitNameBytes) name.resize(kMaxSplitNameBytes);
  return name;
}

template <typename Visit>
void SplitByColumn::for_each_value(const PackInputs& inputs, std::uint64_t first,
                                   std::uint64_t count, Visit&& visit) const {
  if (!integer_) {
    for (std::uint64_t row = first; row < first + count; ++row)
      visit(row, std::string(inputs.text(column_, row)));
    return;
  }
  const DType dtype = inputs.dtype(column_, first);
  const std::size_t size = dtype_size(dtype);
  constexpr std::uint64_t kChunk = 1 << 16;
  std::vector<std::byte> buffer;
  for (std::uint64_t at = first; at < first + count; at += kChunk) {
    const std::uint64_t rows = std::min(kChunk, first + count - at);
    buffer.resize(rows * size);
    inputs.read_raw(column_, at, rows, buffer.data());
    for (std::uint64_t r = 0; r < rows; ++r)
      visit(at + r, integer_text(buffer.data() + r * size, dtype));
  }
}

SplitByColumn::SplitByColumn(const PackInputs& inputs, std::string column)
    : name_(std::move(column)) {
  const auto& columns = inputs.first().columns;
  const auto found = std::find_if(columns.begin(), columns.end(),
                                  [&](const InputColumn& c) { return c.name == name_; });
  if (found == columns.end()) {
    std::string names;
    for (const auto& c : columns) names += (names.empty() ? "" : ", ") + c.name;
    throw UsageError("--split-by " + name_ + ": no packed column has that name (the columns: " +
                     names + "); name one of them, and keep it when --field selects columns");
  }
  column_ = static_cast<std::size_t>(found - columns.begin());
  integer_ = found->kind == ColumnKind::tensor;
  for (const auto& source : inputs.sources()) {
    const InputColumn& own = source.columns[column_];
    if (const std::string why = kind_refusal(own); !why.empty())
      throw Error(source.path, "column '" + name_ + "'",
                  why +
                      "; --split-by takes a text or integer column with one value per row "
                      "(store the split as text or integers, or use --split NAME=FRACTION,...)");
  }

  // Every value, before validation runs: its errors come at once, not after the long pass.
  std::map<std::string, std::string> names;  // directory name -> value
  std::uint64_t start = 0;
  for (const auto& source : inputs.sources()) {
    const auto& nulls = source.columns[column_].null_rows;
    std::uint64_t row = 0;
    // The runs of rows between the column's nulls (whose readers answer placeholders).
    auto scan = [&](std::uint64_t end) {
      if (end > row)
        for_each_value(inputs, start + row, end - row, [&](std::uint64_t, std::string value) {
          if (index_.contains(value)) return;
          if (index_.size() == kMaxSplitValues)
            throw Error(source.path, "column '" + name_ + "'",
                        "holds more than " + std::to_string(kMaxSplitValues) +
                            " distinct values; --split-by writes one dataset per value and is "
                            "meant for a split column such as train/val/test (pack the groups "
                            "apart, or use --split NAME=FRACTION,...)");
          const std::string dir = split_directory_name(value);
          if (const auto [at, added] = names.emplace(dir, value); !added)
            throw Error(source.path, "column '" + name_ + "'",
                        "values '" + at->second + "' and '" + value +
                            "' both make the directory name '" + dir +
                            "' (a name keeps letters, digits, '-', '_' and '.'); make the values "
                            "differ in those characters");
          index_.emplace(value, values_.size());
          values_.push_back({value, dir});
        });
    };
    for (const std::uint64_t null_row : nulls) {
      if (null_row >= source.rows) break;
      scan(null_row);
      row = std::max(row, null_row + 1);
    }
    scan(source.rows);
    start += source.rows;
  }
  std::sort(values_.begin(), values_.end(), [&](const SplitValue& a, const SplitValue& b) {
    return integer_ ? integer_less(a.value, b.value) : a.value < b.value;
  });
  for (std::size_t i = 0; i < values_.size(); ++i) index_[values_[i].value] = i;
}

std::vector<RowList> SplitByColumn::assign(RowList& rows, const PackInputs& inputs) const {
  std::vector<RowList> parts;
  for (std::size_t i = 0; i < values_.size(); ++i) parts.emplace_back(rows.policy());
  std::vector<std::size_t> released(parts.size(), 0);
  constexpr std::size_t kWindow = std::size_t(1) << 20;
  for (std::size_t first = 0; first < rows.size(); first += kWindow) {
    const std::size_t end = std::min(rows.size(), first + kWindow);
    const std::span<const std::uint64_t> window(rows.data() + first, end - first);
    inputs.for_each_run(window, [&](std::uint64_t offset, std::uint64_t global,
                                    std::uint64_t count) {
      (void)offset;
      for_each_value(inputs, global, count, [&](std::uint64_t row, const std::string& value) {
        const auto found = index_.find(value);
        if (found == index_.end())
          throw Error(inputs.sources()[inputs.locate(row).source].path, "column '" + name_ + "'",
                      "row " + std::to_string(inputs.locate(row).row) + " holds '" + value +
                          "', which the first read of the column did not (did the input change "
                          "while packing?)");
        parts[found->second].push_back(row);
      });
    });
    rows.release(first, end - first);
    for (std::size_t p = 0; p < parts.size(); ++p) {
      parts[p].release(released[p], parts[p].size() - released[p]);
      released[p] = parts[p].size();
    }
  }
  return parts;
}

}  // namespace gpucache::detail
