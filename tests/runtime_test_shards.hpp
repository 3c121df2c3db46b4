// Builds small shard files for the runtime tests with the encode_* functions of shard_layout.hpp,
// byte for byte as SPEC.md lays them out, plus the corruptions the tests need.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gpucache/common/hash.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard/shard_layout.hpp"

namespace gpucache::test {

// One column of a whole dataset, as a shard stores it (`column`: kind, dtype, row shape,
// padding) with every row's logical content: `values` holds rows × row_elements() elements (bytes
// of dtype) for tensors; `texts` one string per row for text; `sequences` each row's values
// (bytes of dtype) for sequence columns.
struct TestColumn {
  Column column;
  std::vector<std::byte> values;
  std::vector<std::string> texts;
  std::vector<std::vector<std::byte>> sequences;

  // A variable-length row's bytes.
  std::span<const std::byte> row_bytes(std::uint64_t row) const {
    if (column.kind == ColumnKind::text)
      return std::as_bytes(std::span(texts[row].data(), texts[row].size()));
    return sequences[row];
  }
};

inline TestColumn tensor_column(const std::string& name, DType dtype,
                                std::vector<std::uint64_t> row_shape, bool pad) {
  TestColumn out;
  out.column.name = name;
  out.column.dtype = dtype;
  out.column.row_shape = row_shape;
  out.column.padded_dim = row_shape.empty() ? 1
                          : pad             ? shard::padded_dim_for(row_shape.back(), dtype, 16)
                                            : row_shape.back();
  return out;
}

template <typename T>
void put_value(std::vector<std::byte>& bytes, std::uint64_t index, T value) {
  std::memcpy(bytes.data() + index * sizeof(T), &value, sizeof(T));
}

// value(row, element) = row * 1000 + element, exactly representable in f32 for these sizes.
inline float test_value(std::uint64_t row, std::uint64_t element) {
  return static_cast<float>(row * 1000 + element);
}

// An embedding column: f32 rows [dim] padded to 16 elements, as gpucache pack writes them;
// element j of row r is test_value(r, j).
inline TestColumn f32_column(const std::string& name, std::uint64_t rows, std::uint64_t dim) {
  TestColumn out = tensor_column(name, DType::f32, {dim}, true);
  out.values.resize(rows * dim * 4);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t j = 0; j < dim; ++j) put_value(out.values, r * dim + j, test_value(r, j));
  return out;
}

// The same values stored densely: rows of dim × 4 bytes (format 1.2 when that is not a multiple
// of 16).
inline TestColumn dense_f32_column(const std::string& name, std::uint64_t rows, std::uint64_t dim) {
  TestColumn out = f32_column(name, rows, dim);
  out.column.padded_dim = dim;
  return out;
}

// A scalar i64 column ([rows]): row r is 7r - 3.
inline TestColumn i64_column(const std::string& name, std::uint64_t rows) {
  TestColumn out = tensor_column(name, DType::i64, {}, false);
  out.values.resize(rows * 8);
  for (std::uint64_t r = 0; r < rows; ++r)
    put_value(out.values, r, static_cast<std::int64_t>(r) * 7 - 3);
  return out;
}

inline std::uint8_t image_value(std::uint64_t row, std::uint64_t element) {
  return static_cast<std::uint8_t>((row * 7 + element) % 251);
}

// A u8 column of rows `row_shape` ([3, 4, 5]: format 1.2's row-shape table), dense: element e
// (row-major within the row) of row r is image_value(r, e).
inline TestColumn u8_image_column(const std::string& name, std::uint64_t rows,
                                  std::vector<std::uint64_t> row_shape) {
  TestColumn out = tensor_column(name, DType::u8, std::move(row_shape), false);
  const std::uint64_t elements = out.column.row_elements();
  out.values.resize(rows * elements);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t e = 0; e < elements; ++e)
      put_value(out.values, r * elements + e, image_value(r, e));
  return out;
}

inline TestColumn text_column(const std::string& name, std::uint64_t rows) {
  TestColumn out;
  out.column.name = name;
  out.column.kind = ColumnKind::text;
  out.column.dtype = DType::u8;
  for (std::uint64_t r = 0; r < rows; ++r)
    out.texts.push_back(r % 5 == 3 ? std::string() : "row " + std::to_string(r) + " ✓");
  return out;
}

// Sequence columns (format 1.2). i32 "tokens": row r has r % 5 values (rows 0, 5, 10, ... are
// empty), value k of it is r * 100 + k. i64 "ids": row r has (3r) % 7 values (rows 0, 7, 14, ...
// empty), value k is r * 2^33 + k, which needs all 64 bits.
inline std::uint64_t token_count(std::uint64_t row) {
  return row % 5;
}
inline std::int32_t token_value(std::uint64_t row, std::uint64_t k) {
  return static_cast<std::int32_t>(row * 100 + k);
}
inline std::uint64_t id_count(std::uint64_t row) {
  return row * 3 % 7;
}
inline std::int64_t id_value(std::uint64_t row, std::uint64_t k) {
  return static_cast<std::int64_t>((row << 33) + k);
}

inline TestColumn sequence_column(const std::string& name, DType dtype, std::uint64_t rows) {
  TestColumn out;
  out.column.name = name;
  out.column.kind = ColumnKind::sequence;
  out.column.dtype = dtype;
  out.column.padded_dim = 0;
  for (std::uint64_t r = 0; r < rows; ++r) {
    std::vector<std::byte> row;
    if (dtype == DType::i32) {
      row.resize(token_count(r) * 4);
      for (std::uint64_t k = 0; k < token_count(r); ++k) put_value(row, k, token_value(r, k));
    } else {
      row.resize(id_count(r) * 8);
      for (std::uint64_t k = 0; k < id_count(r); ++k) put_value(row, k, id_value(r, k));
    }
    out.sequences.push_back(std::move(row));
  }
  return out;
}
inline TestColumn i32_sequence_column(const std::string& name, std::uint64_t rows) {
  return sequence_column(name, DType::i32, rows);
}
inline TestColumn i64_sequence_column(const std::string& name, std::uint64_t rows) {
  return sequence_column(name, DType::i64, rows);
}

// Row `row` of a tensor column as the shard stores it: row_pitch_bytes() bytes, each run of the
// innermost dimension followed by zeros up to padded_dim elements.
inline std::vector<std::byte> stored_row(const TestColumn& in, std::uint64_t row) {
  const Column& column = in.column;
  const std::uint64_t itemsize = dtype_size(column.dtype);
  const std::uint64_t run = column.dim() * itemsize, stored_run = column.padded_dim * itemsize;
  const std::uint64_t runs = column.row_elements() / column.dim();
  std::vector<std::byte> out(column.row_pitch_bytes());
  for (std::uint64_t k = 0; k < runs; ++k)
    std::memcpy(out.data() + k * stored_run, in.values.data() + (row * runs + k) * run, run);
  return out;
}

struct ShardOptions {
  std::uint64_t chunk_size = 2 * shard::kAlignment;  // small, so a shard has several chunks
  bool compressed_flag = false;
  // Header dataset fields; 0 means "this shard alone": index + 1 shards, first_row + rows rows.
  std::uint32_t shard_count = 0;
  std::uint64_t dataset_rows = 0;
  std::uint64_t dataset_id = 0x5eed;
};

inline void write_bytes(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<std::byte> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

// Rows [first_row, first_row + rows) of `columns` as one shard file, of the lowest version that
// expresses them (with a row-shape table when a column needs one), as gpucache's writer does.
inline std::vector<std::byte> build_shard(std::uint32_t shard_index, std::uint64_t first_row,
                                          std::uint64_t rows,
                                          const std::vector<TestColumn>& columns,
                                          const ShardOptions& options = {}) {
  using namespace shard;
  Layout layout;
  for (const TestColumn& in : columns) {
    ColumnEntry entry;
    static_cast<Column&>(entry) = in.column;
    layout.columns.push_back(entry);
  }
  Header& h = layout.header;
  h.version_minor = minimum_minor_version(layout.columns);
  h.row_count = rows;
  h.first_row = first_row;
  h.shard_index = shard_index;
  h.shard_count = options.shard_count != 0 ? options.shard_count : shard_index + 1;
  h.dataset_rows = options.dataset_rows != 0 ? options.dataset_rows : first_row + rows;
  h.dataset_id = options.dataset_id;
  h.column_count = static_cast<std::uint32_t>(columns.size());
  h.chunk_size = options.chunk_size;
  h.flags = (options.compressed_flag ? kFlagCompressed : 0) | table_flags(layout.columns);
  h.data_offset = align_up(kHeaderSize + *column_tables_size(h), kAlignment);
  std::uint64_t cursor = h.data_offset;
  std::vector<std::vector<std::uint64_t>> offsets(columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const TestColumn& in = columns[c];
    ColumnEntry& entry = layout.columns[c];
    entry.data_offset = align_up(cursor, kAlignment);
    if (entry.variable_length()) {
      entry.data_size = (rows + 1) * 8;
      const std::uint64_t itemsize = dtype_size(entry.dtype);
      std::uint64_t total = 0;
      offsets[c].push_back(0);
      for (std::uint64_t r = first_row; r < first_row + rows; ++r) {
        total += in.row_bytes(r).size() / itemsize;
        offsets[c].push_back(total);
      }
      entry.aux_offset = align_up(entry.data_offset + entry.data_size, kAlignment);
      entry.aux_size = total * itemsize;
      cursor = entry.aux_offset + entry.aux_size;
    } else {
      entry.data_size = rows * entry.row_pitch_bytes();
      cursor = entry.data_offset + entry.data_size;
    }
  }
  h.data_size = align_up(cursor, kAlignment) - h.data_offset;
  h.stored_data_size = h.data_size;
  h.chunk_count = (h.data_size + h.chunk_size - 1) / h.chunk_size;
  h.chunk_table_offset = align_up(h.data_offset + h.stored_data_size, 64);
  h.file_size = h.chunk_table_offset + h.chunk_count * kChunkEntrySize + kFooterSize;

  std::vector<std::byte> file(h.file_size);
  std::byte* image = file.data() + h.data_offset;
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const TestColumn& in = columns[c];
    const ColumnEntry& entry = layout.columns[c];
    std::byte* out = file.data() + entry.data_offset;
    if (entry.variable_length()) {
      std::memcpy(out, offsets[c].data(), offsets[c].size() * 8);
      std::byte* values = file.data() + entry.aux_offset;
      for (std::uint64_t r = first_row; r < first_row + rows; ++r) {
        const auto bytes = in.row_bytes(r);
        if (!bytes.empty()) std::memcpy(values, bytes.data(), bytes.size());
        values += bytes.size();
      }
    } else {
      for (std::uint64_t r = 0; r < rows; ++r) {
        const auto row = stored_row(in, first_row + r);
        std::memcpy(out + r * row.size(), row.data(), row.size());
      }
    }
  }
  for (std::uint64_t k = 0; k < h.chunk_count; ++k) {
    ChunkEntry chunk;
    chunk.stored_offset = h.data_offset + k * h.chunk_size;
    chunk.stored_size = static_cast<std::uint32_t>(chunk_logical_size(h, k));
    chunk.hash = gpucache::detail::xxh3_64({image + k * h.chunk_size, chunk.stored_size});
    layout.chunks.push_back(chunk);
  }
  const auto column_table = encode_column_tables(layout.columns);
  const auto chunk_table = encode_chunk_table(layout.chunks);
  h.columns_hash = gpucache::detail::xxh3_64(column_table);
  h.chunks_hash = gpucache::detail::xxh3_64(chunk_table);
  const auto header = encode_header(h);
  std::uint64_t header_hash = 0;
  std::memcpy(&header_hash, header.data() + 248, 8);
  const auto footer = encode_footer({h.file_size, header_hash, 0});
  std::memcpy(file.data(), header.data(), header.size());
  std::memcpy(file.data() + kHeaderSize, column_table.data(), column_table.size());
  std::memcpy(file.data() + h.chunk_table_offset, chunk_table.data(), chunk_table.size());
  std::memcpy(file.data() + h.file_size - kFooterSize, footer.data(), footer.size());
  return file;
}

inline std::string shard_name(std::uint32_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%05u.gcs", index);
  return name;
}

// Writes manifest.json for the shards now in `dir` (shard-00000.gcs, ... as a pack lists them).
inline void write_manifest(const std::filesystem::path& dir) {
  shard::Manifest manifest;
  manifest.tool_version = "test";
  for (std::uint32_t k = 0; std::filesystem::exists(dir / shard_name(k)); ++k) {
    const auto bytes = read_bytes((dir / shard_name(k)).string());
    const auto layout = shard::decode_layout(bytes, shard_name(k));
    if (k == 0)
      for (const auto& column : layout.columns) manifest.columns.push_back(column);
    manifest.shards.push_back({shard_name(k), layout.header.row_count, manifest.rows,
                               static_cast<std::uint64_t>(bytes.size()),
                               layout.header.header_hash});
    manifest.rows += layout.header.row_count;
  }
  std::ofstream(dir / "manifest.json") << shard::manifest_to_text(manifest);
}

// Writes a dataset directory: one shard per entry of `shard_rows`, and a manifest.json that lists
// them as gpucache pack would (the runtime checks the shards against it).
inline void write_dataset(const std::filesystem::path& dir, const std::vector<TestColumn>& columns,
                          const std::vector<std::uint64_t>& shard_rows,
                          const ShardOptions& options = {}) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ShardOptions dataset_options = options;
  dataset_options.shard_count = static_cast<std::uint32_t>(shard_rows.size());
  dataset_options.dataset_rows = 0;
  for (std::uint64_t rows : shard_rows) dataset_options.dataset_rows += rows;
  std::uint64_t first = 0;
  for (std::uint32_t k = 0; k < shard_rows.size(); ++k) {
    write_bytes((dir / shard_name(k)).string(),
                build_shard(k, first, shard_rows[k], columns, dataset_options));
    first += shard_rows[k];
  }
  write_manifest(dir);
}

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::random_device random;
    path_ = std::filesystem::temp_directory_path() /
            ("gpucache-runtime-test-" + std::to_string(random()) + std::to_string(random()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace gpucache::test
