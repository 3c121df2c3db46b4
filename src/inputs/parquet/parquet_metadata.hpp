// Parquet's footer (FileMetaData) and page headers, decoded from Thrift into the fields this
// reader uses; every other field is skipped. Field ids and enum values are those of
// parquet-format's parquet.thrift, listed with byte tables in FORMAT.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gpucache::detail::parquet {

enum class PhysicalType : std::int32_t {
  boolean = 0,
  int32 = 1,
  int64 = 2,
  int96 = 3,
  float32 = 4,
  float64 = 5,
  byte_array = 6,
  fixed_len_byte_array = 7,
};

enum class Repetition : std::int32_t { required = 0, optional = 1, repeated = 2 };

// ConvertedType values this reader looks at.
enum class Converted : std::int32_t {
  utf8 = 0,
  map = 1,
  map_key_value = 2,
  list = 3,
  enum_ = 4,
  date = 6,
  time_millis = 7,
  time_micros = 8,
  timestamp_millis = 9,
  timestamp_micros = 10,
  decimal = 5,
  uint_8 = 11,
  uint_16 = 12,
  uint_32 = 13,
  uint_64 = 14,
  int_8 = 15,
  int_16 = 16,
  int_32 = 17,
  int_64 = 18,
  json = 19,
};

// LogicalType is a union; its field id says which member is set.
enum class Logical : std::int16_t {
  none = 0,
  string = 1,
  map = 2,
  list = 3,
  enum_ = 4,
  decimal = 5,
  date = 6,
  time = 7,
  timestamp = 8,
  integer = 10,
  unknown = 11,
  json = 12,
  bson = 13,
  uuid = 14,
  float16 = 15,
};

// TIMESTAMP's and TIME's unit: the id of the TimeUnit union's member that is set.
enum class TimeUnitCode : std::int16_t { none = 0, millis = 1, micros = 2, nanos = 3 };

enum class Encoding : std::int32_t {
  plain = 0,
  plain_dictionary = 2,
  rle = 3,
  bit_packed = 4,
  delta_binary_packed = 5,
  delta_length_byte_array = 6,
  delta_byte_array = 7,
  rle_dictionary = 8,
  byte_stream_split = 9,
};

enum class Codec : std::int32_t {
  uncompressed = 0,
  snappy = 1,
  gzip = 2,
  lzo = 3,
  brotli = 4,
  lz4 = 5,
  zstd = 6,
  lz4_raw = 7,
};

enum class PageType : std::int32_t { data = 0, index = 1, dictionary = 2, data_v2 = 3 };

struct SchemaElement {
  std::optional<PhysicalType> type;  // leaves only
  std::int32_t type_length = 0;      // fixed_len_byte_array
  std::optional<Repetition> repetition;
  std::string name;
  std::int32_t num_children = 0;
  std::optional<Converted> converted;
  Logical logical = Logical::none;
  std::int32_t integer_bits = 0;  // logical integer
  bool integer_signed = true;
  bool time_adjusted_to_utc = false;            // logical TIMESTAMP and TIME: isAdjustedToUTC
  TimeUnitCode time_unit = TimeUnitCode::none;  // logical TIMESTAMP and TIME: unit
  // DECIMAL (LogicalType's members, else SchemaElement's own scale and precision fields).
  std::int32_t decimal_scale = 0;
  std::int32_t decimal_precision = 0;
};

struct ColumnMetadata {
  PhysicalType type = PhysicalType::int32;
  std::vector<std::string> path;
  Codec codec = Codec::uncompressed;
  std::int64_t num_values = 0;
  // The chunk's pages decompressed (a claim, used only to size a text buffer within the cap).
  std::int64_t total_uncompressed_size = 0;
  std::int64_t total_compressed_size = 0;
  std::int64_t data_page_offset = 0;
  std::optional<std::int64_t> dictionary_page_offset;
};

struct ColumnChunk {
  std::string file_path;  // set when the chunk lives in another file
  std::optional<ColumnMetadata> metadata;
  bool encrypted = false;
};

struct RowGroup {
  std::vector<ColumnChunk> columns;
  std::int64_t num_rows = 0;
};

struct FileMetadata {
  std::vector<SchemaElement> schema;  // depth first, the root first
  std::int64_t num_rows = 0;
  std::vector<RowGroup> row_groups;
  std::string created_by;
  bool encrypted = false;  // an encryption algorithm is named (a plaintext footer)
};

struct PageHeader {
  PageType type = PageType::data;
  std::int32_t uncompressed_size = 0;
  std::int32_t compressed_size = 0;
  // Data pages (v1 and v2) and dictionary pages.
  std::int32_t num_values = 0;
  Encoding encoding = Encoding::plain;
  // v1: how the levels are encoded (RLE, or the deprecated BIT_PACKED).
  Encoding definition_level_encoding = Encoding::rle;
  Encoding repetition_level_encoding = Encoding::rle;
  // v2: rows in the page, and the levels' lengths before the (maybe compressed) values.
  std::int32_t num_rows = 0;
  std::int32_t definition_levels_bytes = 0;
  std::int32_t repetition_levels_bytes = 0;
  bool values_compressed = true;
  bool has_page_header = false;    // the header for its type was present
  std::uint64_t header_bytes = 0;  // the bytes the header itself took
};

// The footer's Thrift bytes, `base_offset` being where they start in the file (for errors).
FileMetadata parse_file_metadata(std::span<const std::byte> bytes, const std::string& origin,
                                 std::uint64_t base_offset);
// The page header at the start of `bytes` (which may run on past it).
PageHeader parse_page_header(std::span<const std::byte> bytes, const std::string& origin,
                             std::uint64_t base_offset);

}  // namespace gpucache::detail::parquet
