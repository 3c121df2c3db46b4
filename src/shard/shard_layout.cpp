#include "gpucache/shard/shard_layout.hpp"
#include "gpucache/shard/chunk_table.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/hash.hpp"
#include "gpucache/common/utf8.hpp"
#include "gpucache/error.hpp"

namespace gpucache::shard {
namespace {

template <typename T>
void put(std::byte* out, std::size_t offset, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out[offset + i] = static_cast<std::byte>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff);
}

template <typename T>
T get(const std::byte* in, std::size_t offset) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    value |= static_cast<std::uint64_t>(std::to_integer<std::uint8_t>(in[offset + i])) << (8 * i);
  return static_cast<T>(value);
}

bool all_zero(std::span<const std::byte> bytes) noexcept {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

// Offset of the first non-zero byte, relative to the span.
std::uint64_t first_non_zero(std::span<const std::byte> bytes) noexcept {
  return static_cast<std::uint64_t>(
      std::find_if(bytes.begin(), bytes.end(), [](std::byte b) { return b != std::byte{0}; }) -
      bytes.begin());
}

[[noreturn]] void fail(const std::string& path, const std::string& where,
                       const std::string& cause) {
  throw Error(path, where, cause);
}

void check_gap_zero(std::span<const std::byte> file, std::uint64_t begin, std::uint64_t end,
                    const std::string& path, const std::string& what) {
  if (end <= begin) return;
  const auto gap = file.subspan(begin, end - begin);
  if (!all_zero(gap))
    fail(path, "byte " + std::to_string(begin + first_non_zero(gap)), what + " is not zero");
}

}  // namespace

std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) noexcept {
  return value + (alignment - value % alignment) % alignment;
}

std::uint64_t padded_dim_for(std::uint64_t dim, DType dtype, std::uint64_t pad_to) {
  if (pad_to == 0) throw Error("", "--pad-to", "must be at least 1");
  const std::uint64_t itemsize = dtype_size(dtype);
  auto padded = detail::checked_align_up(dim, pad_to);
  while (padded && (*padded * itemsize) % 16 != 0) padded = detail::checked_add(*padded, pad_to);
  if (!padded || !detail::checked_mul(*padded, itemsize))
    throw Error("", "--pad-to", "padding " + std::to_string(dim) + " elements overflows");
  return *padded;
}

std::uint64_t chunk_logical_size(const Header& header, std::uint64_t index) noexcept {
  const std::uint64_t begin = index * header.chunk_size;
  return std::min(header.chunk_size, header.data_size - begin);
}

std::array<std::byte, kHeaderSize> encode_header(const Header& header) {
  std::array<std::byte, kHeaderSize> out{};
  std::memcpy(out.data(), kMagic.data(), kMagic.size());
  put<std::uint16_t>(out.data(), 8, header.version_major);
  put<std::uint16_t>(out.data(), 10, header.version_minor);
  put<std::uint32_t>(out.data(), 12, static_cast<std::uint32_t>(kHeaderSize));
  put<std::uint64_t>(out.data(), 16, header.flags);
  put<std::uint64_t>(out.data(), 24, header.row_count);
  put<std::uint64_t>(out.data(), 32, header.first_row);
  put<std::uint32_t>(out.data(), 40, header.shard_index);
  put<std::uint32_t>(out.data(), 44, header.column_count);
  put<std::uint64_t>(out.data(), 48, header.column_table_offset);
  put<std::uint64_t>(out.data(), 56, header.data_offset);
  put<std::uint64_t>(out.data(), 64, header.data_size);
  put<std::uint64_t>(out.data(), 72, header.stored_data_size);
  put<std::uint64_t>(out.data(), 80, header.chunk_size);
  put<std::uint64_t>(out.data(), 88, header.chunk_count);
  put<std::uint64_t>(out.data(), 96, header.chunk_table_offset);
  put<std::uint64_t>(out.data(), 104, header.file_size);
  put<std::uint32_t>(out.data(), 112, header.alignment);
  put<std::uint64_t>(out.data(), 120, header.columns_hash);
  put<std::uint64_t>(out.data(), 128, header.chunks_hash);
  if (header.has_dataset_fields()) {
    put<std::uint32_t>(out.data(), 136, header.shard_count);
    put<std::uint64_t>(out.data(), 144, header.dataset_rows);
    put<std::uint64_t>(out.data(), 152, header.dataset_id);
  }
  put<std::uint64_t>(out.data(), 248, detail::xxh3_64(std::span(out).first(248)));
  return out;
}

std::array<std::byte, kColumnEntrySize> encode_column(const ColumnEntry& column) {
  std::array<std::byte, kColumnEntrySize> out{};
  if (column.name.empty() || column.name.size() > kMaxColumnNameBytes)
    throw Error("", "column '" + column.name + "'",
                "name must be 1 to " + std::to_string(kMaxColumnNameBytes) + " bytes");
  // A longer name lives in the names table only (SPEC.md "Names table"); its field stays zero.
  if (column.name.size() <= kMaxShortColumnNameBytes)
    std::memcpy(out.data(), column.name.data(), column.name.size());
  put<std::uint8_t>(out.data(), 64, static_cast<std::uint8_t>(column.kind));
  put<std::uint8_t>(out.data(), 65, static_cast<std::uint8_t>(column.dtype));
  put<std::uint8_t>(out.data(), 66, column.rank());
  put<std::uint64_t>(out.data(), 72, column.dim());
  put<std::uint64_t>(out.data(), 80, column.padded_dim);
  put<std::uint64_t>(out.data(), 88, column.row_pitch_bytes());
  put<std::uint64_t>(out.data(), 96, column.data_offset);
  put<std::uint64_t>(out.data(), 104, column.data_size);
  put<std::uint64_t>(out.data(), 112, column.aux_offset);
  put<std::uint64_t>(out.data(), 120, column.aux_size);
  return out;
}

std::array<std::byte, kChunkEntrySize> encode_chunk(const ChunkEntry& chunk) {
  std::array<std::byte, kChunkEntrySize> out{};
  put<std::uint64_t>(out.data(), 0, chunk.hash);
  put<std::uint64_t>(out.data(), 8, chunk.stored_offset);
  put<std::uint32_t>(out.data(), 16, chunk.stored_size);
  put<std::uint32_t>(out.data(), 20, static_cast<std::uint32_t>(chunk.codec));
  return out;
}

std::array<std::byte, kFooterSize> encode_footer(const Footer& footer) {
  std::array<std::byte, kFooterSize> out{};
  std::memcpy(out.data(), kFooterMagic.data(), kFooterMagic.size());
  put<std::uint64_t>(out.data(), 8, footer.file_size);
  put<std::uint64_t>(out.data(), 16, footer.header_hash);
  put<std::uint64_t>(out.data(), 24, detail::xxh3_64(std::span(out).first(24)));
  return out;
}

std::vector<std::byte> encode_column_tables(const std::vector<ColumnEntry>& columns) {
  const bool shapes = needs_row_shape_table(columns);
  const bool names = needs_names_table(columns);
  std::vector<std::byte> out;
  out.reserve(columns.size() * (kColumnEntrySize + (shapes ? kRowShapeEntrySize : 0) +
                                (names ? kNameEntrySize : 0)));
  for (const auto& column : columns) {
    const auto entry = encode_column(column);
    out.insert(out.end(), entry.begin(), entry.end());
  }
  if (shapes) {
    for (const auto& column : columns) {
      std::array<std::byte, kRowShapeEntrySize> entry{};
      if (column.kind == ColumnKind::tensor && column.row_shape.size() <= kMaxRowDims)
        for (std::size_t d = 0; d < column.row_shape.size(); ++d)
          put<std::uint64_t>(entry.data(), 8 * d, column.row_shape[d]);
      out.insert(out.end(), entry.begin(), entry.end());
    }
  }
  if (names) {
    // Every column's name, short ones too, so the table alone names every column.
    for (const auto& column : columns) {
      std::array<std::byte, kNameEntrySize> entry{};
      std::memcpy(entry.data(), column.name.data(), column.name.size());  // checked above
      out.insert(out.end(), entry.begin(), entry.end());
    }
  }
  return out;
}

bool needs_row_shape_table(const std::vector<ColumnEntry>& columns) noexcept {
  return std::any_of(columns.begin(), columns.end(), [](const ColumnEntry& column) {
    return column.kind == ColumnKind::tensor && column.row_shape.size() >= 2;
  });
}

bool needs_names_table(const std::vector<ColumnEntry>& columns) noexcept {
  return std::any_of(columns.begin(), columns.end(), [](const ColumnEntry& column) {
    return column.name.size() > kMaxShortColumnNameBytes;
  });
}

std::uint64_t table_flags(const std::vector<ColumnEntry>& columns) noexcept {
  return (needs_row_shape_table(columns) ? kFlagRowShapes : 0) |
         (needs_names_table(columns) ? kFlagNames : 0);
}

std::uint16_t minimum_minor_version(const std::vector<ColumnEntry>& columns) noexcept {
  // Only a name over 63 bytes makes a shard 1.3, so every other shard keeps its bytes.
  if (needs_names_table(columns)) return kVersionMinorLongNames;
  for (const auto& column : columns) {
    const bool dense_vector = column.kind == ColumnKind::tensor && column.row_shape.size() == 1 &&
                              column.row_pitch_bytes() % 16 != 0;
    if (column.kind == ColumnKind::sequence || column.row_shape.size() >= 2 || dense_vector)
      return kVersionMinorRowShapes;
  }
  return kVersionMinorDatasetFields;
}

std::vector<std::byte> encode_chunk_table(const std::vector<ChunkEntry>& chunks) {
  std::vector<std::byte> out;
  out.reserve(chunks.size() * kChunkEntrySize);
  for (const auto& chunk : chunks) {
    const auto entry = encode_chunk(chunk);
    out.insert(out.end(), entry.begin(), entry.end());
  }
  return out;
}

namespace {

// The name a names-table entry holds: 1 to 255 bytes of UTF-8, then zero bytes to its end.
std::string decode_long_name(const std::byte* name_entry, std::uint32_t index,
                             const std::string& path) {
  const std::string where = "names table entry " + std::to_string(index);
  const auto length = std::find(name_entry, name_entry + kNameEntrySize, std::byte{0}) - name_entry;
  if (length == 0 || length > static_cast<long>(kMaxColumnNameBytes))
    fail(path, where, "column name is empty or not terminated");
  std::string name(reinterpret_cast<const char*>(name_entry), static_cast<std::size_t>(length));
  if (!all_zero({name_entry + length, static_cast<std::size_t>(kNameEntrySize - length)}))
    fail(path, where, "bytes after the name are not zero");
  if (!detail::valid_utf8(name))
    fail(
        path, where,
        "column name is not UTF-8 (byte " + std::to_string(detail::first_invalid_utf8(name)) + ")");
  return name;
}

// One column table entry, its row-shape entry (nullptr when the shard has no row-shape table)
// and its names-table entry (nullptr when it has none), checked against the rules of `minor`
// (the shard's minor version).
ColumnEntry decode_one_column(const std::byte* entry, const std::byte* shape_entry,
                              const std::byte* name_entry, std::uint16_t minor, std::uint32_t index,
                              const std::string& path) {
  const std::string where = "column table entry " + std::to_string(index);
  ColumnEntry column;
  const auto name_length = std::find(entry, entry + 64, std::byte{0}) - entry;
  if (name_entry) {
    // SPEC.md "Names table": the field holds the name when it fits in 63 bytes, else zeros.
    column.name = decode_long_name(name_entry, index, path);
    const bool fits = column.name.size() <= kMaxShortColumnNameBytes;
    const std::string_view field(reinterpret_cast<const char*>(entry),
                                 static_cast<std::size_t>(name_length));
    if (fits ? field != column.name : name_length != 0)
      fail(path, where,
           fits ? "the name field differs from the names table's name"
                : "the name field of a name over 63 bytes is not zero");
  } else {
    if (name_length == 0 || name_length > static_cast<long>(kMaxShortColumnNameBytes))
      fail(path, where, "column name is empty or not terminated");
    column.name.assign(reinterpret_cast<const char*>(entry), static_cast<std::size_t>(name_length));
  }
  if (!all_zero({entry + name_length, static_cast<std::size_t>(64 - name_length)}) ||
      !all_zero({entry + 67, 5}))
    fail(path, where, "reserved bytes are not zero");
  const auto kind = get<std::uint8_t>(entry, 64);
  const auto dtype_code = get<std::uint8_t>(entry, 65);
  const std::uint8_t newest_kind = minor >= kVersionMinorRowShapes ? 2 : 1;
  if (kind > newest_kind)
    fail(path, where,
         "unknown column kind " + std::to_string(kind) +
             (kind == 2 ? " (sequence columns need format 1.2; the shard says 1." +
                              std::to_string(minor) + ")"
                        : ""));
  if (!dtype_is_known(dtype_code))
    fail(path, where, "unknown dtype code " + std::to_string(dtype_code));
  column.kind = static_cast<ColumnKind>(kind);
  column.dtype = static_cast<DType>(dtype_code);
  // Shape rules are reported against the column's name, as the rules of its regions are.
  const std::string named = "column '" + column.name + "'";
  const auto rank = get<std::uint8_t>(entry, 66);
  const auto dim = get<std::uint64_t>(entry, 72);
  const auto row_pitch_bytes = get<std::uint64_t>(entry, 88);
  column.padded_dim = get<std::uint64_t>(entry, 80);
  const std::uint64_t itemsize = dtype_size(column.dtype);
  std::array<std::uint64_t, kMaxRowDims> shape{};
  if (shape_entry)
    for (std::size_t d = 0; d < kMaxRowDims; ++d) shape[d] = get<std::uint64_t>(shape_entry, 8 * d);
  std::size_t shape_dims = kMaxRowDims;  // up to the last non-zero dimension
  while (shape_dims > 0 && shape[shape_dims - 1] == 0) --shape_dims;
  switch (column.kind) {
    case ColumnKind::tensor: {
      const std::uint8_t max_rank = minor >= kVersionMinorRowShapes ? kMaxRowDims + 1 : 2;
      if (rank < 1 || rank > max_rank)
        fail(path, named,
             "rank must be 1 to " + std::to_string(max_rank) +
                 (rank > 2 && rank <= kMaxRowDims + 1 ? " in format 1." + std::to_string(minor)
                                                      : ""));
      if (rank == 1 && (dim != 1 || column.padded_dim != 1))
        fail(path, named, "a rank-1 column must have dim and padded_dim 1");
      if (rank >= 3) {
        if (!shape_entry)
          fail(path, named,
               "rank " + std::to_string(rank) +
                   " needs a row-shape "
                   "table (header flags bit 1)");
        if (shape_dims != static_cast<std::size_t>(rank - 1) ||
            std::any_of(shape.begin(), shape.begin() + rank - 1,
                        [](std::uint64_t d) { return d == 0; }))
          fail(path, named,
               "the row-shape table does not give " + std::to_string(rank - 1) +
                   " non-zero dimensions");
        if (shape[rank - 2] != dim)
          fail(path, named, "the row-shape table's last dimension is not dim");
        column.row_shape.assign(shape.begin(), shape.begin() + rank - 1);
      } else {
        // SPEC.md "Row-shape table": a rank-r column's entry holds r - 1 dimensions, so a rank-2
        // column's is [dim] (what encode_column_tables writes) and a rank-1 column's is empty.
        const bool entry_ok =
            rank == 2 && shape_entry ? shape_dims == 1 && shape[0] == dim : shape_dims == 0;
        if (!entry_ok)
          fail(path, named,
               rank == 2 ? "the row-shape table's entry of a rank-2 column is not [dim]"
                         : "a rank-1 column has a row shape entry");
        if (rank == 2) column.row_shape = {dim};
      }
      if (column.padded_dim < dim) fail(path, named, "padded_dim is smaller than dim");
      std::optional<std::uint64_t> pitch = detail::checked_mul(column.padded_dim, itemsize);
      for (std::size_t d = 0; pitch && d + 1 < column.row_shape.size(); ++d)
        pitch = detail::checked_mul(*pitch, column.row_shape[d]);
      if (!pitch || *pitch != row_pitch_bytes)
        fail(path, named, "row_pitch_bytes is not the row's elements × dtype size");
      if (rank == 2 && row_pitch_bytes % 16 != 0 && minor < kVersionMinorRowShapes)
        fail(path, named, "row pitch is not a multiple of 16 bytes");
      break;
    }
    case ColumnKind::text:
      if (column.dtype != DType::u8 || rank != 1 || dim != 1 || column.padded_dim != 1 ||
          row_pitch_bytes != 1 || shape_dims != 0)
        fail(path, named, "a text column must be rank 1 u8 with dim 1");
      break;
    case ColumnKind::sequence:
      if (rank != 2 || dim != 0 || column.padded_dim != 0 || row_pitch_bytes != 0 ||
          shape_dims != 0)
        fail(path, named, "a sequence column must be rank 2 with dim, padded_dim and pitch 0");
      break;
  }
  column.data_offset = get<std::uint64_t>(entry, 96);
  column.data_size = get<std::uint64_t>(entry, 104);
  column.aux_offset = get<std::uint64_t>(entry, 112);
  column.aux_size = get<std::uint64_t>(entry, 120);
  return column;
}

}  // namespace

std::optional<std::uint64_t> column_tables_size(const Header& header) noexcept {
  const std::uint64_t per_column = kColumnEntrySize +
                                   (header.has_row_shapes() ? kRowShapeEntrySize : 0) +
                                   (header.has_names_table() ? kNameEntrySize : 0);
  return detail::checked_mul(header.column_count, per_column);
}

std::vector<ColumnEntry> decode_columns(std::span<const std::byte> tables, const Header& header,
                                        const std::string& path) {
  const auto expected = column_tables_size(header);
  if (!expected || *expected != tables.size())
    fail(path, "column table",
         "the column tables are not " + std::to_string(tables.size()) + " bytes");
  const std::uint64_t count = header.column_count;
  const std::byte* shapes =
      header.has_row_shapes() ? tables.data() + count * kColumnEntrySize : nullptr;
  const std::byte* names =
      header.has_names_table()
          ? tables.data() +
                count * (kColumnEntrySize + (header.has_row_shapes() ? kRowShapeEntrySize : 0))
          : nullptr;
  std::vector<ColumnEntry> columns;
  columns.reserve(header.column_count);
  for (std::uint32_t i = 0; i < header.column_count; ++i) {
    columns.push_back(decode_one_column(
        tables.data() + i * kColumnEntrySize, shapes ? shapes + i * kRowShapeEntrySize : nullptr,
        names ? names + i * kNameEntrySize : nullptr, header.version_minor, i, path));
    const std::string named = "column '" + columns.back().name + "'";
    for (std::uint32_t j = 0; j < i; ++j)
      if (columns[j].name == columns.back().name) fail(path, named, "column name appears twice");
  }
  if (header.has_row_shapes() && !needs_row_shape_table(columns))
    fail(path, "header byte 16", "a row-shape table is present but no column has rank 3 or more");
  // Like the row-shape table, present exactly when needed, so a shard has one encoding.
  if (header.has_names_table() && !needs_names_table(columns))
    fail(path, "header byte 16", "a names table is present but no column name is over 63 bytes");
  return columns;
}

Header decode_header(std::span<const std::byte> file, const std::string& path) {
  if (file.size() < kHeaderSize + kFooterSize)
    fail(path, "header",
         "file is " + std::to_string(file.size()) + " bytes, too small for a shard (truncated?)");
  const std::byte* in = file.data();
  if (std::memcmp(in, kMagic.data(), kMagic.size()) != 0)
    fail(path, "header byte 0", "not a gpucache shard (bad magic)");
  Header header;
  header.version_major = get<std::uint16_t>(in, 8);
  header.version_minor = get<std::uint16_t>(in, 10);
  if (header.version_major != kVersionMajor)
    fail(path, "header byte 8",
         "shard format version " + std::to_string(header.version_major) +
             " is not supported by this gpucache (it reads version " +
             std::to_string(kVersionMajor) + ")");
  const auto stored_hash = get<std::uint64_t>(in, 248);
  const auto computed_hash = detail::xxh3_64(file.first(248));
  if (stored_hash != computed_hash)
    fail(path, "header bytes 0-255",
         "header hash mismatch (stored " + detail::hex64(stored_hash) + ", computed " +
             detail::hex64(computed_hash) + "): the header is corrupt");
  if (get<std::uint32_t>(in, 12) != kHeaderSize)
    fail(path, "header byte 12", "header_size is not 256");
  header.flags = get<std::uint64_t>(in, 16);
  header.row_count = get<std::uint64_t>(in, 24);
  header.first_row = get<std::uint64_t>(in, 32);
  header.shard_index = get<std::uint32_t>(in, 40);
  header.column_count = get<std::uint32_t>(in, 44);
  header.column_table_offset = get<std::uint64_t>(in, 48);
  header.data_offset = get<std::uint64_t>(in, 56);
  header.data_size = get<std::uint64_t>(in, 64);
  header.stored_data_size = get<std::uint64_t>(in, 72);
  header.chunk_size = get<std::uint64_t>(in, 80);
  header.chunk_count = get<std::uint64_t>(in, 88);
  header.chunk_table_offset = get<std::uint64_t>(in, 96);
  header.file_size = get<std::uint64_t>(in, 104);
  header.alignment = get<std::uint32_t>(in, 112);
  header.columns_hash = get<std::uint64_t>(in, 120);
  header.chunks_hash = get<std::uint64_t>(in, 128);
  header.header_hash = stored_hash;
  const std::uint64_t known_flags =
      kFlagCompressed | (header.version_minor >= kVersionMinorRowShapes ? kFlagRowShapes : 0) |
      (header.version_minor >= kVersionMinorLongNames ? kFlagNames : 0);
  if (header.flags & ~known_flags) fail(path, "header byte 16", "unknown flags are set");
  if (get<std::uint32_t>(in, 116) != 0)
    fail(path, "header bytes 116-119", "reserved header bytes are not zero");
  if (!header.has_dataset_fields()) {
    if (!all_zero(file.subspan(136, 112)))
      fail(path, "header bytes 136-247", "reserved header bytes are not zero");
    return header;
  }
  header.shard_count = get<std::uint32_t>(in, 136);
  header.dataset_rows = get<std::uint64_t>(in, 144);
  header.dataset_id = get<std::uint64_t>(in, 152);
  // Bytes a later minor version may use are only required to be zero up to the version we know.
  if (header.version_minor <= kVersionMinor &&
      (get<std::uint32_t>(in, 140) != 0 || !all_zero(file.subspan(160, 88))))
    fail(path, "header bytes 140-247", "reserved header bytes are not zero");
  if (header.shard_index >= header.shard_count)
    fail(path, "header byte 136",
         "shard_index " + std::to_string(header.shard_index) + " is not below shard_count " +
             std::to_string(header.shard_count));
  const auto shard_end = detail::checked_add(header.first_row, header.row_count);
  if (!shard_end || *shard_end > header.dataset_rows)
    fail(path, "header byte 144",
         "the shard's rows end past dataset_rows " + std::to_string(header.dataset_rows));
  return header;
}

std::vector<ChunkEntry> decode_chunk_table(std::span<const std::byte> chunk_table, const Header& h,
                                           const std::string& path) {
  const auto data_end = detail::checked_add(h.data_offset, h.stored_data_size);
  const auto chunk_bytes = detail::checked_mul(h.chunk_count, kChunkEntrySize);
  if (!data_end || !chunk_bytes || chunk_table.size() != *chunk_bytes)
    fail(path, "chunk table", "its size does not match the header's chunk_count");
  std::vector<ChunkEntry> chunks(h.chunk_count);
  std::uint64_t next_stored = h.data_offset;
  for (std::uint64_t k = 0; k < h.chunk_count; ++k) {
    const std::byte* entry = chunk_table.data() + k * kChunkEntrySize;
    ChunkEntry& chunk = chunks[k];
    chunk.hash = get<std::uint64_t>(entry, 0);
    chunk.stored_offset = get<std::uint64_t>(entry, 8);
    chunk.stored_size = get<std::uint32_t>(entry, 16);
    const auto codec = get<std::uint32_t>(entry, 20);
    const std::string where = "chunk table entry " + std::to_string(k);
    if (codec > 1) fail(path, where, "unknown codec " + std::to_string(codec));
    chunk.codec = static_cast<Codec>(codec);
    const std::uint64_t logical = chunk_logical_size(h, k);
    if (chunk.stored_offset != next_stored ||
        !detail::range_within(chunk.stored_offset, chunk.stored_size, *data_end))
      fail(path, where, "stored bytes are out of place or outside the data region");
    if (chunk.codec == Codec::raw && chunk.stored_size != logical)
      fail(path, where, "a raw chunk's stored size differs from its logical size");
    if (!h.compressed() && chunk.codec != Codec::raw)
      fail(path, where, "compressed chunk in an uncompressed shard");
    next_stored += chunk.stored_size;
  }
  if (next_stored != *data_end)
    fail(path, "chunk table", "chunks do not cover the stored data region exactly");
  return chunks;
}

Layout decode_layout(std::span<const std::byte> file, const std::string& path) {
  Layout layout;
  Header& h = layout.header;
  h = decode_header(file, path);
  const std::uint64_t size = file.size();
  if (h.file_size != size)
    fail(path, "header byte 104",
         "header says the file is " + std::to_string(h.file_size) + " bytes but it is " +
             std::to_string(size) + (size < h.file_size ? " (truncated)" : " (extended)"));
  if (h.alignment != kAlignment) fail(path, "header byte 112", "alignment is not 4096");
  if (h.column_table_offset != kHeaderSize)
    fail(path, "header byte 48", "column table is not at byte 256");
  if (h.column_count == 0) fail(path, "header byte 44", "shard has no columns");

  // Tables: positions and sizes must be consistent before anything is read from them.
  const auto table_bytes = column_tables_size(h);
  const auto table_end =
      table_bytes ? detail::checked_add(kHeaderSize, *table_bytes) : std::nullopt;
  if (!table_end || *table_end > h.data_offset || h.data_offset % kAlignment != 0)
    fail(path, "header byte 56",
         "data_offset " + std::to_string(h.data_offset) + " is not aligned after the column table");
  if (h.chunk_size == 0 || h.chunk_size % kAlignment != 0)
    fail(path, "header byte 80", "chunk_size is not a positive multiple of 4096");
  if (h.chunk_count != (h.data_size + h.chunk_size - 1) / h.chunk_size)
    fail(path, "header byte 88", "chunk_count does not match data_size and chunk_size");
  if (!h.compressed() && h.stored_data_size != h.data_size)
    fail(path, "header byte 72",
         "stored_data_size differs from data_size in an uncompressed shard");
  const auto data_end = detail::checked_add(h.data_offset, h.stored_data_size);
  if (!data_end || h.chunk_table_offset != align_up(*data_end, 64))
    fail(path, "header byte 96", "chunk_table_offset does not follow the data region");
  const auto chunk_bytes = detail::checked_mul(h.chunk_count, kChunkEntrySize);
  const auto chunk_end =
      chunk_bytes ? detail::checked_add(h.chunk_table_offset, *chunk_bytes) : std::nullopt;
  const auto expected_size =
      chunk_end ? detail::checked_add(*chunk_end, kFooterSize) : std::nullopt;
  if (!expected_size || *expected_size != size)
    fail(path, "header byte 104", "file size does not match the chunk table and footer");

  // Footer.
  const auto footer = file.subspan(size - kFooterSize);
  if (std::memcmp(footer.data(), kFooterMagic.data(), kFooterMagic.size()) != 0)
    fail(path, "byte " + std::to_string(size - kFooterSize),
         "footer magic is missing (truncated?)");
  if (get<std::uint64_t>(footer.data(), 24) != detail::xxh3_64(footer.first(24)))
    fail(path, "bytes " + std::to_string(size - kFooterSize) + "-" + std::to_string(size - 1),
         "footer hash mismatch: the footer is corrupt");
  if (get<std::uint64_t>(footer.data(), 8) != size ||
      get<std::uint64_t>(footer.data(), 16) != h.header_hash)
    fail(path, "byte " + std::to_string(size - kFooterSize), "footer disagrees with the header");

  // Table hashes, then zero gaps.
  const auto column_table = file.subspan(kHeaderSize, *table_bytes);
  if (detail::xxh3_64(column_table) != h.columns_hash)
    fail(path,
         "column table bytes " + std::to_string(kHeaderSize) + "-" + std::to_string(*table_end - 1),
         "column table hash mismatch: the table is corrupt");
  const auto chunk_table = file.subspan(h.chunk_table_offset, *chunk_bytes);
  if (detail::xxh3_64(chunk_table) != h.chunks_hash)
    fail(path,
         "chunk table bytes " + std::to_string(h.chunk_table_offset) + "-" +
             std::to_string(*chunk_end - 1),
         "chunk table hash mismatch: the table is corrupt");
  check_gap_zero(file, *table_end, h.data_offset, path, "gap between column table and data");
  check_gap_zero(file, *data_end, h.chunk_table_offset, path, "gap between data and chunk table");

  // Columns.
  std::uint64_t previous_end = h.data_offset;
  const std::uint64_t logical_end = h.data_offset + h.data_size;
  if (!detail::checked_add(h.data_offset, h.data_size))
    fail(path, "header byte 64", "data_size overflows");
  for (ColumnEntry& column : decode_columns(column_table, h, path)) {
    const std::string named = "column '" + column.name + "'";
    std::optional<std::uint64_t> expected_data_size;
    if (column.kind == ColumnKind::tensor) {
      expected_data_size = detail::checked_mul(h.row_count, column.row_pitch_bytes());
      if (column.aux_offset != 0 || column.aux_size != 0)
        fail(path, named, "a tensor column has text bytes");
    } else {
      if (column.aux_size % dtype_size(column.dtype) != 0)
        fail(path, named,
             "its values are not a whole number of " + std::string(dtype_name(column.dtype)) +
                 " elements");
      auto rows_plus_one = detail::checked_add(h.row_count, 1);
      expected_data_size = rows_plus_one ? detail::checked_mul(*rows_plus_one, 8) : std::nullopt;
    }
    if (!expected_data_size || *expected_data_size != column.data_size)
      fail(path, named,
           "data_size " + std::to_string(column.data_size) + " does not match " +
               std::to_string(h.row_count) + " rows");
    auto check_region = [&](std::uint64_t offset, std::uint64_t length, const char* what) {
      if (offset % kAlignment != 0 || offset < previous_end ||
          !detail::range_within(offset, length, logical_end))
        fail(path, named,
             std::string(what) + " region at " + std::to_string(offset) +
                 " is misaligned, overlapping or outside the data region");
      previous_end = offset + length;
    };
    check_region(column.data_offset, column.data_size, "data");
    if (column.variable_length()) check_region(column.aux_offset, column.aux_size, "values");
    layout.columns.push_back(std::move(column));
  }
  if (h.data_size != align_up(previous_end, kAlignment) - h.data_offset)
    fail(path, "header byte 64", "data_size does not end at the page after the last column");

  layout.chunks = decode_chunk_table(chunk_table, h, path);
  return layout;
}

}  // namespace gpucache::shard
