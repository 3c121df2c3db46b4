// Reads a shard for gpucache's own tools (verify, export, inspect): maps the file, decodes and
// checks the layout, checks chunk hashes on request, and gives access to the logical data image
// (the mapping itself for uncompressed shards, a decompressed copy otherwise).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpucache/common/mapped_file.hpp"
#include "gpucache/shard/chunks.hpp"
#include "gpucache/shard/shard_layout.hpp"

namespace gpucache::shard {

class ShardReader {
 public:
  // Throws gpucache::Error for any structural problem (decode_layout). When verify_chunks is set,
  // also fails on the first chunk whose hash does not match.
  explicit ShardReader(const std::string& path, bool verify_chunks = true, unsigned threads = 0);

  const std::string& path() const noexcept { return path_; }
  const Layout& layout() const noexcept { return layout_; }
  std::uint64_t rows() const noexcept { return layout_.header.row_count; }
  std::optional<std::size_t> find_column(std::string_view name) const noexcept;
  // The column's rows × row_pitch_bytes bytes.
  std::span<const std::byte> tensor_data(std::size_t column) const;
  // Row `row` of a variable-length column: its values' bytes (UTF-8 for text). Throws
  // gpucache::Error when the row's offsets break the rule (find_bad_offset).
  std::span<const std::byte> values(std::size_t column, std::uint64_t row) const;
  std::string_view text(std::size_t column, std::uint64_t row) const;

 private:
  std::span<const std::byte> logical(std::uint64_t absolute_offset, std::uint64_t size) const;
  std::string path_;
  std::shared_ptr<const detail::MappedFile> file_;
  Layout layout_;
  std::vector<std::byte> decompressed_;  // compressed shards only
};

}  // namespace gpucache::shard
