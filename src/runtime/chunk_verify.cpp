#include "chunk_verify.hpp"

#include <algorithm>
#include <cstdio>

#include "gpucache/error.hpp"

namespace gpucache::runtime::detail {
namespace {

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// "column 'a' rows 10-19, column 'b' rows 10-19": what the broken bytes held, so the user knows
// which data is affected without running gpucache verify.
std::string columns_inside(const shard::Layout& layout, ByteRange range) {
  std::string text;
  for (const auto& column : layout.columns) {
    const std::uint64_t begin = std::max(range.begin, column.data_offset);
    const std::uint64_t end = std::min(range.end, column.data_offset + column.data_size);
    if (begin < end) {
      text += (text.empty() ? "" : ", ") + ("column '" + column.name + "'");
      if (column.kind == shard::ColumnKind::tensor && column.row_pitch_bytes > 0) {
        const std::uint64_t first = (begin - column.data_offset) / column.row_pitch_bytes;
        const std::uint64_t last = (end - 1 - column.data_offset) / column.row_pitch_bytes;
        text += " rows " + std::to_string(first) + "-" + std::to_string(last);
      }
    }
    if (column.kind == shard::ColumnKind::text &&
        std::max(range.begin, column.aux_offset) <
            std::min(range.end, column.aux_offset + column.aux_size))
      text += (text.empty() ? "" : ", ") + ("text of column '" + column.name + "'");
  }
  return text;
}

}  // namespace

ByteRange chunk_range(const shard::Header& header, std::uint64_t chunk) noexcept {
  const std::uint64_t begin = header.data_offset + chunk * header.chunk_size;
  return {begin, begin + shard::chunk_logical_size(header, chunk)};
}

std::vector<std::uint64_t> chunks_touching(const shard::Header& header,
                                           const std::vector<ByteRange>& ranges) {
  std::vector<std::uint64_t> chunks;
  for (const auto& range : ranges) {
    if (range.begin >= range.end) continue;
    const std::uint64_t first = (range.begin - header.data_offset) / header.chunk_size;
    const std::uint64_t last = (range.end - 1 - header.data_offset) / header.chunk_size;
    for (std::uint64_t k = first; k <= last && k < header.chunk_count; ++k) chunks.push_back(k);
  }
  std::sort(chunks.begin(), chunks.end());
  chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
  return chunks;
}

void check_chunk(std::span<const std::byte> bytes, const shard::Layout& layout, std::uint64_t chunk,
                 const std::string& path) {
  const std::uint64_t stored = layout.chunks[chunk].hash;
  const std::uint64_t computed = shard::xxh3_64(bytes);
  if (stored == computed) return;
  const ByteRange range = chunk_range(layout.header, chunk);
  const std::string inside = columns_inside(layout, range);
  throw Error(path,
              "chunk " + std::to_string(chunk) + ", bytes " + std::to_string(range.begin) + "-" +
                  std::to_string(range.end - 1) + (inside.empty() ? "" : " (" + inside + ")"),
              "chunk hash mismatch (stored " + hex(stored) + ", computed " + hex(computed) +
                  "): the shard is corrupt; repack it or run `gpucache verify` for details");
}

}  // namespace gpucache::runtime::detail
