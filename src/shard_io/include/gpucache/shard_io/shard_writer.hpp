// Builds one shard: the caller fills the logical data image (zeroed, so all padding is already
// zero), then write() hashes and optionally compresses the chunks in parallel and writes the file
// atomically (temporary name, fsync unless built `unflushed`, rename).
//
// Built for an uncompressed shard at a known path, the image is a shared mapping of the shard's
// preallocated temporary file, so filling it fills the page cache directly: no anonymous buffer to
// zero and no copy by write(). Where the file system cannot preallocate, it falls back to an
// anonymous buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpucache/common/atomic_file.hpp"
#include "gpucache/shard/shard_layout.hpp"
#include "gpucache/shard_io/streamed_chunk_hashes.hpp"

namespace gpucache::shard {

struct WriteOptions {
  std::uint64_t first_row = 0;
  std::uint32_t shard_index = 0;
  // The dataset the shard belongs to (SPEC.md, header bytes 136-159).
  std::uint32_t shard_count = 1;
  std::uint64_t dataset_rows = 0;
  std::uint64_t dataset_id = 0;
  std::uint64_t chunk_size = kDefaultChunkSize;
  int zstd_level = 0;  // 0: uncompressed
  unsigned threads = 0;
};

struct WrittenShard {
  std::string path;
  std::uint64_t rows = 0;
  std::uint64_t bytes = 0;
  std::uint64_t header_hash = 0;
};

class ShardBuilder {
 public:
  // value_bytes[i] is the size of the values of variable-length column i: its UTF-8 bytes for
  // text, values × dtype size for a sequence (ignored for tensor columns). `durability` is what
  // write() promises about the file it makes (detail::Durability).
  ShardBuilder(const std::vector<Column>& columns, std::uint64_t rows,
               const std::vector<std::uint64_t>& value_bytes,
               detail::Durability durability = detail::Durability::flushed);
  // The image backed by `path`'s temporary file: write() must then be given the same path and no
  // compression.
  ShardBuilder(const std::vector<Column>& columns, std::uint64_t rows,
               const std::vector<std::uint64_t>& value_bytes, const std::string& path,
               detail::Durability durability = detail::Durability::flushed);
  ~ShardBuilder();
  ShardBuilder(const ShardBuilder&) = delete;
  ShardBuilder& operator=(const ShardBuilder&) = delete;

  std::uint64_t rows() const noexcept { return rows_; }
  const std::vector<ColumnEntry>& columns() const noexcept { return columns_; }
  // A tensor column's rows × row_pitch_bytes region.
  std::span<std::byte> tensor_data(std::size_t column) noexcept;
  // Copies `bytes` into a tensor column's region at `offset` (relative to the region). For a
  // file-backed image this is one pwrite into the page cache: whole pages written so never need
  // zeroing first, which filling the shared mapping would (a page fault per page, then a memset
  // of a fresh page-cache page). Use it for bulk data produced in a staging buffer. The stored
  // bytes are hashed as they pass (write() then need not read them back), so they are final: never
  // change them afterwards through tensor_data(). store() and hash_stored() feed one running hash:
  // never call them from two threads at once.
  void store(std::size_t column, std::uint64_t offset, std::span<const std::byte> bytes);
  // store() in two halves that may run on two threads at once. write_stored writes the bytes,
  // in the pieces store() writes, but neither hashes them (hash_stored() must be given the same
  // bytes) nor starts their writeback (start_writeback()). Bytes that lie in a mapped input are
  // written from the mapping: one copy, page cache to page cache, faster here than both cp's
  // read + write and copy_file_range (which splices through a 64 KiB pipe: 0.45 s for 1 GiB
  // against 0.29 s for these writes, docs/benchmarks.md).
  void write_stored(std::size_t column, std::uint64_t offset, std::span<const std::byte> bytes);
  // write_stored may run on one thread while hash_stored runs on another.
  void hash_stored(std::size_t column, std::uint64_t offset, std::span<const std::byte> bytes);
  // store() for rows that lie apart in memory (a tensor each), stored back to back from `offset`,
  // `row_bytes` each, in two halves that may run on two threads at once: write_rows writes them
  // from where they lie (vectored writes into the page cache, no gathering copy first) and starts
  // their writeback; hash_rows hashes them, like hash_stored.
  void write_rows(std::size_t column, std::uint64_t offset, std::span<const std::byte* const> rows,
                  std::uint64_t row_bytes);
  void hash_rows(std::size_t column, std::uint64_t offset, std::span<const std::byte* const> rows,
                 std::uint64_t row_bytes);
  // Starts sending a stored range to disk (write_stored leaves that to the caller, so another
  // thread can do it): write()'s fsync then finds little left to wait for.
  void start_writeback(std::size_t column, std::uint64_t offset, std::uint64_t size) const noexcept;
  // A variable-length column's rows + 1 offsets (counting values: bytes for text) and its values.
  std::span<std::uint64_t> offsets(std::size_t column) noexcept;
  std::span<std::byte> values(std::size_t column) noexcept;
  // The same for text: its offsets, and its UTF-8 bytes as characters.
  std::span<std::uint64_t> text_offsets(std::size_t column) noexcept { return offsets(column); }
  std::span<char> text_bytes(std::size_t column) noexcept;

  WrittenShard write(const std::string& path, const WriteOptions& options) const;
  bool file_backed() const noexcept { return backing_ != nullptr; }

 private:
  void map_anonymous();
  bool map_file(const std::string& path);
  std::span<std::byte> region(std::uint64_t absolute_offset, std::uint64_t size) const noexcept;
  std::vector<ColumnEntry> columns_;
  std::uint64_t rows_ = 0;
  std::uint64_t data_offset_ = 0;
  std::uint64_t data_size_ = 0;
  detail::Durability durability_ = detail::Durability::flushed;
  std::byte* image_ = nullptr;  // anonymous or shared file mapping: zero-filled by the kernel
  std::unique_ptr<detail::AtomicFile> backing_;  // the temporary file behind a file-backed image
  // Hashes of the default-size chunks that stores filled.
  std::unique_ptr<StreamedChunkHashes> streamed_;
  const ColumnEntry& stored_column(std::size_t column, std::uint64_t offset,
                                   std::uint64_t size) const;
  // Writes bytes at an absolute offset: into the temporary file, or into the anonymous image.
  void put(std::uint64_t absolute_offset, std::span<const std::byte> bytes);
};

// The size of a shard file with these columns: the one size model, the writer's own layout code
// (place_columns, file_size_for), for pack's planner (where to cut shards by --shard-size), its
// output budget (estimate_shard_bytes) and write() alike. Holds the column table once, so asking
// row after row costs O(columns) and allocates nothing.
class ShardSizeModel {
 public:
  explicit ShardSizeModel(const std::vector<Column>& columns);
  // Bytes of a shard of `rows` rows whose variable-length columns hold `value_bytes` (by column
  // index; missing entries are 0): exactly the file_size write() gives it uncompressed, and at
  // least a compressed one's (a chunk zstd does not shrink is stored raw).
  std::uint64_t bytes(std::uint64_t rows, const std::vector<std::uint64_t>& value_bytes);

 private:
  std::vector<ColumnEntry> columns_;  // laid out again by each call
  std::uint64_t data_offset_ = 0;
};

// ShardSizeModel(columns).bytes(rows, value_bytes). pack checks its output with it before writing.
std::uint64_t estimate_shard_bytes(const std::vector<Column>& columns, std::uint64_t rows,
                                   const std::vector<std::uint64_t>& value_bytes);

}  // namespace gpucache::shard
