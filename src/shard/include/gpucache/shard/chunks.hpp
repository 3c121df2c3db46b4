// The shard format's rules about data that every reader applies: chunk ranges and the chunk hash
// check (SPEC.md "Data region and chunks", "Verification" item 6), the offsets of text columns,
// and naming what a byte range of a shard holds. verify, the tools' ShardReader and the runtime
// reader all call these, so a rule and its error message exist once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpucache/error.hpp"
#include "gpucache/shard/shard_layout.hpp"

namespace gpucache::shard {

// [begin, end) in a shard: absolute file offsets for uncompressed shards, which equal offsets in
// the logical data image (SPEC.md: column offsets are logical offsets).
struct ByteRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

// Chunk `chunk`'s bytes in the logical data image.
ByteRange chunk_range(const Header& header, std::uint64_t chunk) noexcept;
// Indices of the chunks overlapping any non-empty range, ascending and without repeats.
std::vector<std::uint64_t> chunks_touching(const Header& header,
                                           const std::vector<ByteRange>& ranges);

// Decompresses one zstd chunk (codec 1) into `out`, its logical size; the cause on failure.
std::optional<std::string> decompress_chunk(std::span<const std::byte> stored,
                                            std::span<std::byte> out);
// XXH3-64 of chunk `chunk`'s logical bytes, read from the whole shard file `file`: raw chunks as
// they lie, zstd chunks after decompression. Throws the error of chunk_error for a frame that does
// not decompress to the chunk's size.
std::uint64_t chunk_hash(std::span<const std::byte> file, const Layout& layout, std::uint64_t chunk,
                         const std::string& path);
// The one error for a chunk whose bytes do not hash to the value in the chunk table: names the
// chunk, its bytes and what they hold ("column 'embedding' rows 0-4095"), both hashes, and what
// to do.
Error chunk_hash_error(const std::string& path, const Layout& layout, std::uint64_t chunk,
                       std::uint64_t computed);
// Throws chunk_hash_error unless `logical` (chunk `chunk`'s logical bytes) hashes as recorded.
void check_chunk_hash(std::span<const std::byte> logical, const Layout& layout, std::uint64_t chunk,
                      const std::string& path);

// What logical bytes [begin, end) of a shard hold: "column 'a' rows 10-19, column 'b' offsets",
// "column 'b' text bytes", or "alignment padding" when no column region is touched. Rows of a
// column are counted within the shard.
std::string describe_range(const Layout& layout, ByteRange range);

// The values a variable-length column's offsets count: its UTF-8 bytes for text, its values for a
// sequence (aux_size / dtype size).
std::uint64_t offset_limit(const ColumnEntry& column) noexcept;
// Offsets of text and sequence columns (SPEC.md "Column table"): `count` + 1 little-endian u64
// values at `offsets`, the offsets of `count` consecutive rows, must not decrease and must not pass
// `limit` (offset_limit); those of a whole column must also start at 0 and end at `limit`. Returns
// the index of the first value that breaks a rule, counted from `offsets`.
std::optional<std::uint64_t> find_bad_offset(const std::byte* offsets, std::uint64_t count,
                                             std::uint64_t limit, bool whole_column) noexcept;
// The one error for offsets that break the rule: value `index` of the offsets of rows starting
// at `first_row` of column `column`, at file offset `at`.
Error bad_offset_error(const std::string& path, const ColumnEntry& column, std::uint64_t first_row,
                       std::uint64_t index, std::uint64_t at);

}  // namespace gpucache::shard
