#include "gpucache/shard_io/shard_reader.hpp"

#include <zstd.h>

#include <cstring>

#include "gpucache/common/parallel.hpp"
#include "gpucache/error.hpp"

namespace gpucache::shard {
namespace {

// Decompresses a zstd chunk into out (its logical size); returns the error text on failure.
std::optional<std::string> decompress_chunk(std::span<const std::byte> stored,
                                            std::span<std::byte> out) {
  const std::size_t size = ZSTD_decompress(out.data(), out.size(), stored.data(), stored.size());
  if (ZSTD_isError(size)) return std::string("zstd frame is corrupt: ") + ZSTD_getErrorName(size);
  if (size != out.size()) return std::string("zstd frame decompresses to the wrong size");
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_chunk(std::span<const std::byte> file, const Layout& layout,
                                       std::uint64_t k) {
  const ChunkEntry& chunk = layout.chunks[k];
  const auto stored = file.subspan(chunk.stored_offset, chunk.stored_size);
  std::uint64_t hash;
  if (chunk.codec == Codec::raw) {
    hash = xxh3_64(stored);
  } else {
    std::vector<std::byte> buffer(chunk_logical_size(layout.header, k));
    if (auto error = decompress_chunk(stored, buffer)) return error;
    hash = xxh3_64(buffer);
  }
  if (hash == chunk.hash) return std::nullopt;
  char text[96];
  std::snprintf(text, sizeof text, "chunk %llu hash mismatch (stored %016llx, computed %016llx)",
                static_cast<unsigned long long>(k), static_cast<unsigned long long>(chunk.hash),
                static_cast<unsigned long long>(hash));
  return std::string(text);
}

ShardReader::ShardReader(const std::string& path, bool verify_chunks, unsigned threads)
    : path_(path), file_(detail::MappedFile::open(path)) {
  layout_ = decode_layout(file_->bytes(), path);
  const Header& h = layout_.header;
  if (h.compressed()) decompressed_.resize(h.data_size);
  detail::parallel_for_each(h.chunk_count, threads, [&](std::uint64_t k) {
    const ChunkEntry& chunk = layout_.chunks[k];
    const auto stored = file_->bytes().subspan(chunk.stored_offset, chunk.stored_size);
    if (h.compressed()) {
      std::span<std::byte> out(decompressed_.data() + k * h.chunk_size, chunk_logical_size(h, k));
      if (chunk.codec == Codec::raw)
        std::memcpy(out.data(), stored.data(), out.size());
      else if (auto error = decompress_chunk(stored, out))
        throw Error(path, "chunk " + std::to_string(k), *error);
      if (verify_chunks && xxh3_64(out) != chunk.hash)
        throw Error(path, "chunk " + std::to_string(k), "hash mismatch: the data is corrupt");
    } else if (verify_chunks && xxh3_64(stored) != chunk.hash) {
      throw Error(path,
                  "bytes " + std::to_string(chunk.stored_offset) + "-" +
                      std::to_string(chunk.stored_offset + chunk.stored_size - 1),
                  "chunk " + std::to_string(k) + " hash mismatch: the data is corrupt");
    }
  });
}

std::optional<std::size_t> ShardReader::find_column(std::string_view name) const noexcept {
  for (std::size_t i = 0; i < layout_.columns.size(); ++i)
    if (layout_.columns[i].name == name) return i;
  return std::nullopt;
}

std::span<const std::byte> ShardReader::logical(std::uint64_t absolute_offset,
                                                std::uint64_t size) const {
  if (layout_.header.compressed())
    return std::span<const std::byte>(decompressed_)
        .subspan(absolute_offset - layout_.header.data_offset, size);
  return file_->bytes().subspan(absolute_offset, size);
}

std::span<const std::byte> ShardReader::tensor_data(std::size_t column) const {
  const ColumnEntry& entry = layout_.columns.at(column);
  return logical(entry.data_offset, entry.data_size);
}

std::string_view ShardReader::text(std::size_t column, std::uint64_t row) const {
  const ColumnEntry& entry = layout_.columns.at(column);
  const auto offsets = logical(entry.data_offset, entry.data_size);
  std::uint64_t begin, end;
  std::memcpy(&begin, offsets.data() + row * 8, 8);
  std::memcpy(&end, offsets.data() + (row + 1) * 8, 8);
  if (begin > end || end > entry.aux_size)
    throw Error(path_, "column '" + entry.name + "' row " + std::to_string(row),
                "text offsets are corrupt");
  const auto bytes = logical(entry.aux_offset + begin, end - begin);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace gpucache::shard
