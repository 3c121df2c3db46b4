#include "gpucache/shard_io/shard_reader.hpp"

#include <cstring>

#include "gpucache/common/parallel.hpp"
#include "gpucache/error.hpp"

namespace gpucache::shard {
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
      if (verify_chunks) check_chunk_hash(out, layout_, k, path);
    } else if (verify_chunks) {
      check_chunk_hash(stored, layout_, k, path);
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

std::span<const std::byte> ShardReader::values(std::size_t column, std::uint64_t row) const {
  const ColumnEntry& entry = layout_.columns.at(column);
  const auto offsets = logical(entry.data_offset, entry.data_size);
  if (const auto bad = find_bad_offset(offsets.data() + row * 8, 1, offset_limit(entry), false))
    throw bad_offset_error(path_, entry, row, *bad, entry.data_offset + (row + *bad) * 8);
  std::uint64_t begin, end;
  std::memcpy(&begin, offsets.data() + row * 8, 8);
  std::memcpy(&end, offsets.data() + (row + 1) * 8, 8);
  const std::uint64_t itemsize = dtype_size(entry.dtype);
  return logical(entry.aux_offset + begin * itemsize, (end - begin) * itemsize);
}

std::string_view ShardReader::text(std::size_t column, std::uint64_t row) const {
  const auto bytes = values(column, row);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace gpucache::shard
