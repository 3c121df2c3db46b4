// The binary layout of a gpucache shard (src/shard/SPEC.md): constants, the decoded header,
// column and chunk tables, and the structural checks every reader runs before trusting an offset.
// Depends only on the C++ standard library and xxHash, so the runtime reader can use it alone.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpucache/column.hpp"
#include "gpucache/dtype.hpp"

namespace gpucache::shard {

inline constexpr std::array<std::uint8_t, 8> kMagic{0x89, 'G', 'P', 'C', '\r', '\n', 0x1A, '\n'};
inline constexpr std::array<std::uint8_t, 8> kFooterMagic{0x89, 'G', 'P', 'C', 'E', 'N', 'D', '\n'};
inline constexpr std::uint16_t kVersionMajor = 1;
// The newest minor version this code reads and writes. 1.1 added the dataset fields
// (shard_count, dataset_rows, dataset_id) to the header; 1.2 rows of any shape and sequences;
// 1.3 column names of up to 255 bytes (the names table). Writers write the lowest version a shard
// needs (minimum_minor_version).
inline constexpr std::uint16_t kVersionMinor = 3;
inline constexpr std::uint16_t kVersionMinorDatasetFields = 1;
inline constexpr std::uint16_t kVersionMinorRowShapes = 2;
inline constexpr std::uint16_t kVersionMinorLongNames = 3;
inline constexpr std::uint64_t kHeaderSize = 256;
inline constexpr std::uint64_t kColumnEntrySize = 128;
inline constexpr std::uint64_t kChunkEntrySize = 24;
inline constexpr std::uint64_t kFooterSize = 32;
inline constexpr std::uint64_t kAlignment = 4096;
inline constexpr std::uint64_t kDefaultChunkSize = 4ull << 20;
// A column name is 1 to kMaxColumnNameBytes (column.hpp) bytes of UTF-8. The column table's
// 64-byte name field holds names of up to kMaxShortColumnNameBytes; a shard with a longer name
// carries every name in the names table (1.3, kNameEntrySize bytes a column: up to 255 bytes and
// a terminating zero).
inline constexpr std::uint64_t kMaxShortColumnNameBytes = 63;
inline constexpr std::uint64_t kRowShapeEntrySize = 64;
inline constexpr std::uint64_t kNameEntrySize = 256;

// The packer's provenance columns (which input, and which row of it, each row came from) live in
// a namespace of their own: their names start with '@', which no user column name may (a user
// name starting with it is made legal by the packer, and the rename reported), so a user field
// called `source` or `source_row` never collides with them. Signed types, so torch computes with
// them. Datasets written before this rule carry `source` (u16) and `source_row` (u64) instead,
// which readers show as ordinary columns.
inline constexpr char kProvenancePrefix = '@';
inline constexpr std::string_view kSourceColumn = "@source";         // i32: index into `inputs`
inline constexpr std::string_view kSourceRowColumn = "@source_row";  // i64: row in that input
inline constexpr DType kSourceColumnDType = DType::i32;
inline constexpr DType kSourceRowColumnDType = DType::i64;
inline bool is_provenance_column(std::string_view name) {
  return !name.empty() && name.front() == kProvenancePrefix;
}
inline constexpr std::uint64_t kFlagCompressed = 1;
inline constexpr std::uint64_t kFlagRowShapes = 2;  // a row-shape table follows the column table
inline constexpr std::uint64_t kFlagNames = 4;      // a names table follows them (1.3)

enum class Codec : std::uint32_t { raw = 0, zstd = 1 };

struct Header {
  std::uint16_t version_major = kVersionMajor;
  // Writers set the lowest version the shard needs (minimum_minor_version); 1.1 by default.
  std::uint16_t version_minor = kVersionMinorDatasetFields;
  std::uint64_t flags = 0;
  std::uint64_t row_count = 0;
  std::uint64_t first_row = 0;
  std::uint32_t shard_index = 0;
  std::uint32_t column_count = 0;
  std::uint64_t column_table_offset = kHeaderSize;
  std::uint64_t data_offset = 0;
  std::uint64_t data_size = 0;
  std::uint64_t stored_data_size = 0;
  std::uint64_t chunk_size = kDefaultChunkSize;
  std::uint64_t chunk_count = 0;
  std::uint64_t chunk_table_offset = 0;
  std::uint64_t file_size = 0;
  std::uint32_t alignment = kAlignment;
  std::uint64_t columns_hash = 0;
  std::uint64_t chunks_hash = 0;
  // The dataset this shard belongs to (version 1.1; zero in 1.0 shards): a reader without the
  // manifest can still tell a missing shard or a shard from another dataset.
  std::uint32_t shard_count = 0;
  std::uint64_t dataset_rows = 0;
  std::uint64_t dataset_id = 0;
  std::uint64_t header_hash = 0;

  bool compressed() const noexcept { return (flags & kFlagCompressed) != 0; }
  bool has_dataset_fields() const noexcept { return version_minor >= kVersionMinorDatasetFields; }
  bool has_row_shapes() const noexcept { return (flags & kFlagRowShapes) != 0; }
  bool has_names_table() const noexcept { return (flags & kFlagNames) != 0; }
};

// A column as a shard's column table places it: its description, and where its bytes lie in the
// logical data image (text columns: offsets in data_*, UTF-8 bytes in aux_*).
struct ColumnEntry : Column {
  std::uint64_t data_offset = 0;
  std::uint64_t data_size = 0;
  std::uint64_t aux_offset = 0;
  std::uint64_t aux_size = 0;
};

struct ChunkEntry {
  std::uint64_t hash = 0;
  std::uint64_t stored_offset = 0;
  std::uint32_t stored_size = 0;
  Codec codec = Codec::raw;
};

struct Footer {
  std::uint64_t file_size = 0;
  std::uint64_t header_hash = 0;
  std::uint64_t footer_hash = 0;
};

// Everything in a shard except the data region.
struct Layout {
  Header header;
  std::vector<ColumnEntry> columns;
  std::vector<ChunkEntry> chunks;
};

std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) noexcept;
// padded_dim for a rank-2 column: the smallest multiple of pad_to whose byte size is a multiple
// of 16. Throws gpucache::Error for pad_to == 0 or an overflowing result.
std::uint64_t padded_dim_for(std::uint64_t dim, DType dtype, std::uint64_t pad_to);
// Logical size of chunk `index`.
std::uint64_t chunk_logical_size(const Header& header, std::uint64_t index) noexcept;

// Serialisation. encode_* fill the hash fields they own (header_hash, footer_hash) themselves.
std::array<std::byte, kHeaderSize> encode_header(const Header& header);
std::array<std::byte, kColumnEntrySize> encode_column(const ColumnEntry& column);
// The column table, followed by the row-shape table when a column needs one
// (needs_row_shape_table) and the names table when a name needs one (needs_names_table): the
// bytes columns_hash covers. Throws gpucache::Error naming the column for a name that is empty
// or longer than kMaxColumnNameBytes.
std::vector<std::byte> encode_column_tables(const std::vector<ColumnEntry>& columns);
std::array<std::byte, kChunkEntrySize> encode_chunk(const ChunkEntry& chunk);
std::array<std::byte, kFooterSize> encode_footer(const Footer& footer);
std::vector<std::byte> encode_chunk_table(const std::vector<ChunkEntry>& chunks);

// Decodes the header from the first 256 bytes and checks magic, versions, sizes and header_hash.
// Throws gpucache::Error(path, "header byte N" / "header", cause).
Header decode_header(std::span<const std::byte> file, const std::string& path);
// Bytes of the column table and, when the header's flags say so, the row-shape and names tables
// after it; nothing when that overflows.
std::optional<std::uint64_t> column_tables_size(const Header& header) noexcept;
// Decodes the columns from `tables` (column_tables_size(header) bytes from byte 256) and checks
// every rule that needs only the header: names, reserved bytes, kinds, dtypes, ranks, row shapes
// and pitches, and that the header's version allows what the columns use. Not their regions.
std::vector<ColumnEntry> decode_columns(std::span<const std::byte> tables, const Header& header,
                                        const std::string& path);

// What a writer must declare for these columns: whether a row-shape table is needed (a tensor of
// rank 3 or more), whether a names table is (a name over 63 bytes), the header flags saying so,
// and the lowest minor version that expresses them (SPEC.md "Versions").
bool needs_row_shape_table(const std::vector<ColumnEntry>& columns) noexcept;
bool needs_names_table(const std::vector<ColumnEntry>& columns) noexcept;
std::uint64_t table_flags(const std::vector<ColumnEntry>& columns) noexcept;
std::uint16_t minimum_minor_version(const std::vector<ColumnEntry>& columns) noexcept;
// Decodes and checks the whole layout of a mapped or fully read shard: header, both tables and
// their hashes, the footer, the file size, zero gaps, and every structural rule of SPEC.md
// "Verification" items 1-5. Chunk data hashes are not checked here.
Layout decode_layout(std::span<const std::byte> file, const std::string& path);

}  // namespace gpucache::shard
