#include "pack_part.hpp"

#include <algorithm>

#include "gpucache/error.hpp"

namespace gpucache::detail {
namespace {

std::uint64_t share_begin(std::uint64_t total, const PartSpec& part, std::uint32_t index) {
  // floor(index · total / count) without overflow for any total below 2^64 / 2^32.
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(total) * index) / part.count);
}

// Rows [first, first + count) of a column, renumbered from 0.
InputColumn window_column(InputColumn column, std::uint64_t first, std::uint64_t count) {
  column.rows = count;
  std::vector<std::uint64_t> nulls;
  for (auto it = std::lower_bound(column.null_rows.begin(), column.null_rows.end(), first);
       it != column.null_rows.end() && *it < first + count; ++it)
    nulls.push_back(*it - first);
  column.null_rows = std::move(nulls);
  if (auto read = column.read_rows)
    column.read_rows = [read, first](std::uint64_t r, std::uint64_t n, std::span<std::byte> out) {
      read(first + r, n, out);
    };
  if (auto direct = column.direct_rows)
    column.direct_rows = [direct, first](std::uint64_t r, std::uint64_t n) {
      return direct(first + r, n);
    };
  if (auto device = column.device_rows)
    column.device_rows = [device, first](std::uint64_t r, std::uint64_t n) {
      return device(first + r, n);
    };
  if (auto pointers = column.row_pointers)
    column.row_pointers = [pointers, first](std::uint64_t r, std::uint64_t n,
                                            const std::byte** out) {
      return pointers(first + r, n, out);
    };
  if (auto release = column.release_rows)
    column.release_rows = [release, first](std::uint64_t r, std::uint64_t n) {
      release(first + r, n);
    };
  if (auto text = column.text_row)
    column.text_row = [text, first](std::uint64_t r) { return text(first + r); };
  if (auto length = column.row_length)
    column.row_length = [length, first](std::uint64_t r) { return length(first + r); };
  if (auto sequence = column.read_sequence)
    column.read_sequence = [sequence, first](std::uint64_t r, std::span<std::byte> out) {
      sequence(first + r, out);
    };
  return column;
}

}  // namespace

bool part_uses_row_ranges(std::size_t input_count, const PartSpec& part) {
  return input_count < part.count;
}

std::vector<std::string> part_input_files(const std::vector<std::string>& inputs,
                                          const PartSpec& part) {
  std::vector<std::string> sorted = inputs;
  std::sort(sorted.begin(), sorted.end());
  if (part_uses_row_ranges(sorted.size(), part)) return sorted;
  const auto begin = share_begin(sorted.size(), part, part.index);
  const auto end = share_begin(sorted.size(), part, part.index + 1);
  return {sorted.begin() + static_cast<std::ptrdiff_t>(begin),
          sorted.begin() + static_cast<std::ptrdiff_t>(end)};
}

std::vector<Source> part_row_ranges(std::vector<Source> sources, const PartSpec& part) {
  std::uint64_t total = 0;
  for (const auto& source : sources) total += source.rows;
  if (total < part.count)
    throw UsageError("--part " + std::to_string(part.index) + "/" + std::to_string(part.count) +
                     ": the inputs hold " + std::to_string(total) +
                     " rows, fewer than there are parts; use fewer parts");
  const std::uint64_t begin = share_begin(total, part, part.index);
  const std::uint64_t end = share_begin(total, part, part.index + 1);
  std::vector<Source> kept;
  std::uint64_t start = 0;
  for (auto& source : sources) {
    const std::uint64_t lo = std::max(begin, start), hi = std::min(end, start + source.rows);
    start += source.rows;
    if (lo >= hi) continue;
    const std::uint64_t first = lo - (start - source.rows);
    Source window;
    window.path = source.path;
    window.rows = hi - lo;
    window.mapping = source.mapping;
    window.input_index = source.input_index;
    window.row_offset = source.row_offset + first;
    for (auto& column : source.columns)
      window.columns.push_back(window_column(std::move(column), first, hi - lo));
    kept.push_back(std::move(window));
  }
  return kept;
}

nlohmann::ordered_json part_section(const std::vector<Source>& sources, std::size_t input_count,
                                    const PartSpec& part) {
  nlohmann::ordered_json json;
  json["index"] = part.index;
  json["count"] = part.count;
  const bool rows = part_uses_row_ranges(input_count, part);
  json["rule"] = rows ? "rows" : "files";
  json["inputs_total"] = input_count;
  // The provenance column `source` of this part's rows counts from first_input: it numbers the
  // inputs of the whole run, so the merged dataset's inputs list (the parts' in order) matches.
  // Row-range parts list every input (they share files), whole-file parts their own.
  json["first_input"] = rows || sources.empty() ? 0 : sources.front().input_index;
  if (rows) {
    nlohmann::ordered_json ranges = nlohmann::ordered_json::array();
    for (const auto& source : sources)
      ranges.push_back(
          {{"path", source.path}, {"first_row", source.row_offset}, {"rows", source.rows}});
    json["row_ranges"] = ranges;
  }
  return json;
}

}  // namespace gpucache::detail
