#include "gpucache/shard_io/shard_writer.hpp"

#include <sys/mman.h>
#include <zstd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>

#include "gpucache/common/atomic_file.hpp"
#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/hash.hpp"
#include "gpucache/common/parallel.hpp"
#include "gpucache/error.hpp"

static_assert(std::endian::native == std::endian::little,
              "the shard writer stores native integers and floats as little-endian");

namespace gpucache::shard {
namespace {

// Lays out the column regions in table order, each at the next aligned offset.
std::uint64_t place_columns(std::vector<ColumnEntry>& columns, std::uint64_t rows,
                            std::uint64_t data_offset,
                            const std::vector<std::uint64_t>& value_bytes) {
  std::uint64_t cursor = data_offset;
  auto claim = [&](std::uint64_t size) {
    const std::uint64_t offset = align_up(cursor, kAlignment);
    const auto end = detail::checked_add(offset, size);
    if (!end) throw Error("", "shard layout", "shard size overflows 64 bits");
    cursor = *end;
    return offset;
  };
  for (std::size_t i = 0; i < columns.size(); ++i) {
    ColumnEntry& column = columns[i];
    if (column.kind == ColumnKind::tensor) {
      const auto size = detail::checked_mul(rows, column.row_pitch_bytes());
      if (!size) throw Error("", "column '" + column.name + "'", "size overflows 64 bits");
      column.data_size = *size;
      column.data_offset = claim(column.data_size);
    } else {
      column.data_size = (rows + 1) * 8;
      column.data_offset = claim(column.data_size);
      column.aux_size = i < value_bytes.size() ? value_bytes[i] : 0;
      column.aux_offset = claim(column.aux_size);
    }
  }
  return align_up(cursor, kAlignment) - data_offset;
}

std::vector<ColumnEntry> entries_for(const std::vector<Column>& specs) {
  std::vector<ColumnEntry> columns;
  for (const auto& spec : specs) {
    ColumnEntry column;
    static_cast<Column&>(column) = spec;
    // Variable-length columns have no row shape (SPEC.md "Column table"); text holds UTF-8 bytes.
    if (spec.kind == ColumnKind::text) {
      column.dtype = DType::u8;
      column.row_shape.clear();
      column.padded_dim = 1;
    } else if (spec.kind == ColumnKind::sequence) {
      column.row_shape.clear();
      column.padded_dim = 0;
    }
    columns.push_back(std::move(column));
  }
  return columns;
}

std::uint64_t data_offset_for(const std::vector<ColumnEntry>& columns) {
  const std::uint64_t per_column = kColumnEntrySize +
                                   (needs_row_shape_table(columns) ? kRowShapeEntrySize : 0) +
                                   (needs_names_table(columns) ? kNameEntrySize : 0);
  return align_up(kHeaderSize + columns.size() * per_column, kAlignment);
}

// The file's size once the data region ends at `stored_end`: the chunk table starts at the next
// multiple of 64 and the footer follows it (SPEC.md "File layout").
std::uint64_t file_size_for(std::uint64_t stored_end, std::uint64_t chunk_count) noexcept {
  return align_up(stored_end, 64) + chunk_count * kChunkEntrySize + kFooterSize;
}

}  // namespace

ShardSizeModel::ShardSizeModel(const std::vector<Column>& columns)
    : columns_(entries_for(columns)), data_offset_(data_offset_for(columns_)) {}

std::uint64_t ShardSizeModel::bytes(std::uint64_t rows,
                                    const std::vector<std::uint64_t>& value_bytes) {
  const std::uint64_t data_size = place_columns(columns_, rows, data_offset_, value_bytes);
  const std::uint64_t chunks = (data_size + kDefaultChunkSize - 1) / kDefaultChunkSize;
  return file_size_for(data_offset_ + data_size, chunks);
}

std::uint64_t estimate_shard_bytes(const std::vector<Column>& specs, std::uint64_t rows,
                                   const std::vector<std::uint64_t>& value_bytes) {
  return ShardSizeModel(specs).bytes(rows, value_bytes);
}

ShardBuilder::ShardBuilder(const std::vector<Column>& specs, std::uint64_t rows,
                           const std::vector<std::uint64_t>& value_bytes,
                           detail::Durability durability)
    : columns_(entries_for(specs)),
      rows_(rows),
      data_offset_(data_offset_for(columns_)),
      durability_(durability) {
  if (columns_.empty()) throw Error("", "shard layout", "a shard needs at least one column");
  data_size_ = place_columns(columns_, rows, data_offset_, value_bytes);
  streamed_ = std::make_unique<StreamedChunkHashes>(data_size_, kDefaultChunkSize);
  map_anonymous();
}

ShardBuilder::ShardBuilder(const std::vector<Column>& specs, std::uint64_t rows,
                           const std::vector<std::uint64_t>& value_bytes, const std::string& path,
                           detail::Durability durability)
    : columns_(entries_for(specs)),
      rows_(rows),
      data_offset_(data_offset_for(columns_)),
      durability_(durability) {
  if (columns_.empty()) throw Error("", "shard layout", "a shard needs at least one column");
  data_size_ = place_columns(columns_, rows, data_offset_, value_bytes);
  streamed_ = std::make_unique<StreamedChunkHashes>(data_size_, kDefaultChunkSize);
  if (!map_file(path)) map_anonymous();
}

void ShardBuilder::map_anonymous() {
  if (data_size_ == 0) return;
  void* mapping =
      ::mmap(nullptr, data_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED)
    throw Error("", "shard layout",
                "cannot allocate " + std::to_string(data_size_) +
                    " bytes for a shard: " + std::strerror(errno));
  image_ = static_cast<std::byte*>(mapping);
  // Huge pages cut the page faults of filling a 1 GiB shard by 512x; a hint, not a requirement.
  ::madvise(image_, data_size_, MADV_HUGEPAGE);
}

bool ShardBuilder::map_file(const std::string& path) {
  static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  if (data_size_ == 0 || data_offset_ % page != 0) return false;
  auto file = std::make_unique<detail::AtomicFile>(path, durability_);
  // Allocating every block first turns a full disk into an error here, instead of SIGBUS while
  // the mapping is filled.
  if (!file->preallocate(data_offset_ + data_size_)) return false;
  void* mapping = ::mmap(nullptr, data_size_, PROT_READ | PROT_WRITE, MAP_SHARED,
                         file->descriptor(), static_cast<off_t>(data_offset_));
  if (mapping == MAP_FAILED) return false;
  image_ = static_cast<std::byte*>(mapping);
  backing_ = std::move(file);
  return true;
}

ShardBuilder::~ShardBuilder() {
  if (image_ != nullptr) ::munmap(image_, data_size_);
}

std::span<std::byte> ShardBuilder::region(std::uint64_t absolute_offset,
                                          std::uint64_t size) const noexcept {
  return {image_ + (absolute_offset - data_offset_), size};
}

std::span<std::byte> ShardBuilder::tensor_data(std::size_t column) noexcept {
  return region(columns_[column].data_offset, columns_[column].data_size);
}

const ColumnEntry& ShardBuilder::stored_column(std::size_t column, std::uint64_t offset,
                                               std::uint64_t size) const {
  const ColumnEntry& entry = columns_.at(column);
  if (entry.kind != ColumnKind::tensor || offset > entry.data_size ||
      size > entry.data_size - offset)
    throw Error("", "column '" + entry.name + "'", "internal: store outside the column's region");
  return entry;
}

void ShardBuilder::put(std::uint64_t absolute_offset, std::span<const std::byte> bytes) {
  if (backing_ != nullptr)
    backing_->write_at(absolute_offset, bytes);
  else
    std::memcpy(region(absolute_offset, bytes.size()).data(), bytes.data(), bytes.size());
}

// Pieces small enough to still be in cache when they are hashed, right after being copied. Small
// writes also make the page cache take small folios: large ones come from the high-order free
// blocks that a virtual machine's free page reporting hands back to the host, which must then
// fault every page in again (2 MiB writes ran 2-3x slower than these on such a VM).
constexpr std::size_t kStorePiece = std::size_t{256} << 10;

void ShardBuilder::store(std::size_t column, std::uint64_t offset,
                         std::span<const std::byte> bytes) {
  const ColumnEntry& entry = stored_column(column, offset, bytes.size());
  for (std::size_t done = 0; done < bytes.size(); done += kStorePiece) {
    const auto piece = bytes.subspan(done, std::min(kStorePiece, bytes.size() - done));
    const std::uint64_t absolute = entry.data_offset + offset + done;
    put(absolute, piece);
    streamed_->add(absolute - data_offset_, piece);
  }
  if (backing_ != nullptr) backing_->start_writeback(entry.data_offset + offset, bytes.size());
}

void ShardBuilder::write_stored(std::size_t column, std::uint64_t offset,
                                std::span<const std::byte> bytes) {
  const ColumnEntry& entry = stored_column(column, offset, bytes.size());
  for (std::size_t done = 0; done < bytes.size(); done += kStorePiece)
    put(entry.data_offset + offset + done,
        bytes.subspan(done, std::min(kStorePiece, bytes.size() - done)));
}

void ShardBuilder::write_rows(std::size_t column, std::uint64_t offset,
                              std::span<const std::byte* const> rows, std::uint64_t row_bytes) {
  const ColumnEntry& entry = stored_column(column, offset, rows.size() * row_bytes);
  const std::uint64_t absolute = entry.data_offset + offset;
  if (backing_ == nullptr) {
    for (std::size_t r = 0; r < rows.size(); ++r)
      std::memcpy(region(absolute + r * row_bytes, row_bytes).data(), rows[r], row_bytes);
    return;
  }
  // kStorePiece bytes per call, as store() writes.
  const std::size_t rows_per_write =
      std::max<std::size_t>(1, kStorePiece / std::max<std::uint64_t>(row_bytes, 1));
  std::vector<std::span<const std::byte>> pieces;
  for (std::size_t first = 0; first < rows.size(); first += rows_per_write) {
    const std::size_t count = std::min(rows_per_write, rows.size() - first);
    pieces.clear();
    for (std::size_t r = first; r < first + count; ++r) pieces.emplace_back(rows[r], row_bytes);
    backing_->write_pieces_at(absolute + first * row_bytes, pieces);
  }
  backing_->start_writeback(absolute, rows.size() * row_bytes);
}

void ShardBuilder::hash_rows(std::size_t column, std::uint64_t offset,
                             std::span<const std::byte* const> rows, std::uint64_t row_bytes) {
  const ColumnEntry& entry = stored_column(column, offset, rows.size() * row_bytes);
  const std::uint64_t start = entry.data_offset + offset - data_offset_;
  for (std::size_t r = 0; r < rows.size(); ++r)
    streamed_->add(start + r * row_bytes, {rows[r], row_bytes});
}

void ShardBuilder::start_writeback(std::size_t column, std::uint64_t offset,
                                   std::uint64_t size) const noexcept {
  // (A size of 0 would mean "to the end of the file" to sync_file_range.)
  if (backing_ == nullptr || column >= columns_.size() || size == 0) return;
  backing_->start_writeback(columns_[column].data_offset + offset, size);
}

void ShardBuilder::hash_stored(std::size_t column, std::uint64_t offset,
                               std::span<const std::byte> bytes) {
  const ColumnEntry& entry = stored_column(column, offset, bytes.size());
  streamed_->add(entry.data_offset + offset - data_offset_, bytes);
}

std::span<std::uint64_t> ShardBuilder::offsets(std::size_t column) noexcept {
  auto bytes = region(columns_[column].data_offset, columns_[column].data_size);
  return {reinterpret_cast<std::uint64_t*>(bytes.data()), rows_ + 1};
}

std::span<std::byte> ShardBuilder::values(std::size_t column) noexcept {
  return region(columns_[column].aux_offset, columns_[column].aux_size);
}

std::span<char> ShardBuilder::text_bytes(std::size_t column) noexcept {
  auto bytes = region(columns_[column].aux_offset, columns_[column].aux_size);
  return {reinterpret_cast<char*>(bytes.data()), bytes.size()};
}

WrittenShard ShardBuilder::write(const std::string& path, const WriteOptions& options) const {
  if (backing_ != nullptr && (path != backing_->path() || options.zstd_level != 0))
    throw Error(path, "", "internal: a file-backed shard is written uncompressed to its own path");
  Header header;
  header.row_count = rows_;
  header.first_row = options.first_row;
  header.shard_index = options.shard_index;
  header.shard_count = std::max(options.shard_count, options.shard_index + 1);
  header.dataset_rows = std::max(options.dataset_rows, options.first_row + rows_);
  header.dataset_id = options.dataset_id;
  header.column_count = static_cast<std::uint32_t>(columns_.size());
  header.data_offset = data_offset_;
  header.data_size = data_size_;
  header.chunk_size = options.chunk_size;
  header.chunk_count = (data_size_ + options.chunk_size - 1) / options.chunk_size;
  if (options.zstd_level != 0) header.flags |= kFlagCompressed;
  header.version_minor = minimum_minor_version(columns_);
  header.flags |= table_flags(columns_);

  // Hash (and compress) every chunk independently, so the thread count cannot change the bytes.
  std::vector<ChunkEntry> chunks(header.chunk_count);
  std::vector<std::vector<std::byte>> compressed(options.zstd_level != 0 ? header.chunk_count : 0);
  const std::span<const std::byte> image(image_, data_size_);
  detail::parallel_for_each(header.chunk_count, options.threads, [&](std::uint64_t k) {
    const auto logical = image.subspan(k * header.chunk_size, chunk_logical_size(header, k));
    chunks[k].stored_size = static_cast<std::uint32_t>(logical.size());
    const auto streamed =
        header.chunk_size == streamed_->chunk_size() ? streamed_->hash(k) : std::nullopt;
    if (streamed && options.zstd_level == 0) {
      chunks[k].hash = *streamed;
      return;
    }
    chunks[k].hash = streamed ? *streamed : detail::xxh3_64(logical);
    // A file-backed image's pages are page cache (written back by commit's fsync): once hashed
    // they can leave this process's resident set, so a 1 GiB shard never is resident at once.
    if (backing_ != nullptr)
      ::madvise(const_cast<std::byte*>(logical.data()), logical.size(), MADV_DONTNEED);
    if (options.zstd_level == 0) return;
    auto& out = compressed[k];
    out.resize(ZSTD_compressBound(logical.size()));
    const std::size_t size =
        ZSTD_compress(out.data(), out.size(), logical.data(), logical.size(), options.zstd_level);
    if (ZSTD_isError(size))
      throw Error(path, "chunk " + std::to_string(k), ZSTD_getErrorName(size));
    if (size < logical.size()) {
      out.resize(size);
      chunks[k].codec = Codec::zstd;
      chunks[k].stored_size = static_cast<std::uint32_t>(size);
    } else {
      out.clear();  // incompressible: store raw
    }
  });
  std::uint64_t stored = data_offset_;
  for (auto& chunk : chunks) {
    chunk.stored_offset = stored;
    stored += chunk.stored_size;
  }
  header.stored_data_size = stored - data_offset_;
  header.chunk_table_offset = align_up(stored, 64);
  header.file_size = file_size_for(stored, header.chunk_count);
  const auto column_table = encode_column_tables(columns_);
  const auto chunk_table = encode_chunk_table(chunks);
  header.columns_hash = detail::xxh3_64(column_table);
  header.chunks_hash = detail::xxh3_64(chunk_table);
  const auto header_bytes = encode_header(header);
  header.header_hash = detail::xxh3_64(std::span(header_bytes).first(248));
  const auto footer = encode_footer({header.file_size, header.header_hash, 0});

  if (backing_ != nullptr) {
    // The data is in the file already; the zero gaps are preallocated zeros.
    backing_->write_at(0, header_bytes);
    backing_->write_at(kHeaderSize, column_table);
    backing_->write_at(header.chunk_table_offset, chunk_table);
    backing_->write_at(header.chunk_table_offset + chunk_table.size(), footer);
    backing_->commit();
    return {path, rows_, header.file_size, header.header_hash};
  }
  detail::AtomicFile file(path, durability_);
  file.write(header_bytes);
  file.write(column_table);
  file.write_zeros(data_offset_ - file.size());
  if (options.zstd_level == 0) {
    file.write(image);
  } else {
    for (std::uint64_t k = 0; k < header.chunk_count; ++k) {
      if (chunks[k].codec == Codec::zstd)
        file.write(compressed[k]);
      else
        file.write(image.subspan(k * header.chunk_size, chunk_logical_size(header, k)));
    }
  }
  file.write_zeros(header.chunk_table_offset - file.size());
  file.write(chunk_table);
  file.write(footer);
  file.commit();
  return {path, rows_, header.file_size, header.header_hash};
}

}  // namespace gpucache::shard
