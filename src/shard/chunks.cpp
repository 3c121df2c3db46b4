#include "gpucache/shard/chunks.hpp"

#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "gpucache/common/hash.hpp"

namespace gpucache::shard {

ByteRange chunk_range(const Header& header, std::uint64_t chunk) noexcept {
  const std::uint64_t begin = header.data_offset + chunk * header.chunk_size;
  return {begin, begin + chunk_logical_size(header, chunk)};
}

std::vector<std::uint64_t> chunks_touching(const Header& header,
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

std::optional<std::string> decompress_chunk(std::span<const std::byte> stored,
                                            std::span<std::byte> out) {
  const std::size_t size = ZSTD_decompress(out.data(), out.size(), stored.data(), stored.size());
  if (ZSTD_isError(size)) return std::string("zstd frame is corrupt: ") + ZSTD_getErrorName(size);
  if (size != out.size()) return std::string("zstd frame decompresses to the wrong size");
  return std::nullopt;
}

std::uint64_t chunk_hash(std::span<const std::byte> file, const Layout& layout, std::uint64_t chunk,
                         const std::string& path) {
  const ChunkEntry& entry = layout.chunks[chunk];
  const auto stored = file.subspan(entry.stored_offset, entry.stored_size);
  if (entry.codec == Codec::raw) return detail::xxh3_64(stored);
  std::vector<std::byte> logical(chunk_logical_size(layout.header, chunk));
  if (auto cause = decompress_chunk(stored, logical))
    throw Error(path,
                "chunk " + std::to_string(chunk) + " (" +
                    describe_range(layout, chunk_range(layout.header, chunk)) + ")",
                *cause);
  return detail::xxh3_64(logical);
}

Error chunk_hash_error(const std::string& path, const Layout& layout, std::uint64_t chunk,
                       std::uint64_t computed) {
  const ByteRange range = chunk_range(layout.header, chunk);
  return Error(path,
               "chunk " + std::to_string(chunk) + ", bytes " + std::to_string(range.begin) + "-" +
                   std::to_string(range.end - 1) + " (" + describe_range(layout, range) + ")",
               "chunk hash mismatch (stored " + detail::hex64(layout.chunks[chunk].hash) +
                   ", computed " + detail::hex64(computed) +
                   "): the shard is corrupt; repack it or run `gpucache verify` for details");
}

void check_chunk_hash(std::span<const std::byte> logical, const Layout& layout, std::uint64_t chunk,
                      const std::string& path) {
  const std::uint64_t computed = detail::xxh3_64(logical);
  if (computed != layout.chunks[chunk].hash) throw chunk_hash_error(path, layout, chunk, computed);
}

std::string describe_range(const Layout& layout, ByteRange range) {
  std::string parts;
  auto add = [&](const std::string& part) { parts += (parts.empty() ? "" : ", ") + part; };
  for (const auto& column : layout.columns) {
    auto overlap = [&](std::uint64_t region_begin, std::uint64_t region_size, const char* what) {
      const std::uint64_t begin = std::max(range.begin, region_begin);
      const std::uint64_t end = std::min(range.end, region_begin + region_size);
      if (begin >= end) return;
      if (column.kind == ColumnKind::tensor && column.row_pitch_bytes() > 0)
        add("column '" + column.name + "' rows " +
            std::to_string((begin - region_begin) / column.row_pitch_bytes()) + "-" +
            std::to_string((end - 1 - region_begin) / column.row_pitch_bytes()));
      else
        add("column '" + column.name + "' " + what);
    };
    overlap(column.data_offset, column.data_size, "offsets");
    if (column.variable_length())
      overlap(column.aux_offset, column.aux_size,
              column.kind == ColumnKind::text ? "text bytes" : "values");
  }
  return parts.empty() ? "alignment padding" : parts;
}

std::uint64_t offset_limit(const ColumnEntry& column) noexcept {
  const std::uint64_t itemsize = dtype_size(column.dtype);
  return itemsize == 0 ? 0 : column.aux_size / itemsize;
}

std::optional<std::uint64_t> find_bad_offset(const std::byte* offsets, std::uint64_t count,
                                             std::uint64_t limit, bool whole_column) noexcept {
  std::uint64_t previous = 0;
  for (std::uint64_t i = 0; i <= count; ++i) {
    std::uint64_t value;
    std::memcpy(&value, offsets + i * 8, 8);  // little-endian hosts only, as the format
    const bool starts_wrong = i == 0 && whole_column && value != 0;
    const bool ends_wrong = i == count && whole_column && value != limit;
    if (starts_wrong || ends_wrong || value > limit || (i > 0 && value < previous)) return i;
    previous = value;
  }
  return std::nullopt;
}

Error bad_offset_error(const std::string& path, const ColumnEntry& column, std::uint64_t first_row,
                       std::uint64_t index, std::uint64_t at) {
  return Error(path,
               "column '" + column.name + "' row " + std::to_string(first_row + index) +
                   ", bytes " + std::to_string(at) + "-" + std::to_string(at + 7),
               std::string(column.kind == ColumnKind::text ? "text" : "sequence") +
                   " offsets are not monotonic or do not end at the " +
                   std::to_string(offset_limit(column)) +
                   (column.kind == ColumnKind::text ? " text bytes" : " values") +
                   ": the shard is corrupt");
}

}  // namespace gpucache::shard
