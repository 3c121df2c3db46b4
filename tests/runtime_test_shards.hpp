// Builds small shard files for the runtime tests with the encode_* functions of shard_layout.hpp,
// byte for byte as SPEC.md lays them out, plus the corruptions the tests need.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gpucache/common/hash.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard/shard_layout.hpp"

namespace gpucache::test {

// One column of a whole dataset: `values` holds every row's logical elements (rows × dim, as
// bytes of dtype) for tensors; `texts` one string per row for text columns.
struct TestColumn {
  std::string name;
  DType dtype = DType::f32;
  std::uint8_t rank = 2;
  std::uint64_t dim = 1;
  bool text = false;
  std::vector<std::byte> values;
  std::vector<std::string> texts;
};

// value(row, element) = row * 1000 + element, exactly representable in f32 for these sizes.
inline float test_value(std::uint64_t row, std::uint64_t element) {
  return static_cast<float>(row * 1000 + element);
}

inline TestColumn f32_column(const std::string& name, std::uint64_t rows, std::uint64_t dim) {
  TestColumn column{name, DType::f32, 2, dim, false, {}, {}};
  column.values.resize(rows * dim * 4);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t j = 0; j < dim; ++j) {
      const float v = test_value(r, j);
      std::memcpy(column.values.data() + (r * dim + j) * 4, &v, 4);
    }
  return column;
}

inline TestColumn i64_column(const std::string& name, std::uint64_t rows) {
  TestColumn column{name, DType::i64, 1, 1, false, {}, {}};
  column.values.resize(rows * 8);
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::int64_t v = static_cast<std::int64_t>(r) * 7 - 3;
    std::memcpy(column.values.data() + r * 8, &v, 8);
  }
  return column;
}

inline TestColumn text_column(const std::string& name, std::uint64_t rows) {
  TestColumn column{name, DType::u8, 1, 1, true, {}, {}};
  for (std::uint64_t r = 0; r < rows; ++r)
    column.texts.push_back(r % 5 == 3 ? std::string() : "row " + std::to_string(r) + " ✓");
  return column;
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

// Rows [first_row, first_row + rows) of `columns` as one shard file.
inline std::vector<std::byte> build_shard(std::uint32_t shard_index, std::uint64_t first_row,
                                          std::uint64_t rows,
                                          const std::vector<TestColumn>& columns,
                                          const ShardOptions& options = {}) {
  using namespace shard;
  Layout layout;
  Header& h = layout.header;
  h.row_count = rows;
  h.first_row = first_row;
  h.shard_index = shard_index;
  h.shard_count = options.shard_count != 0 ? options.shard_count : shard_index + 1;
  h.dataset_rows = options.dataset_rows != 0 ? options.dataset_rows : first_row + rows;
  h.dataset_id = options.dataset_id;
  h.column_count = static_cast<std::uint32_t>(columns.size());
  h.chunk_size = options.chunk_size;
  h.flags = options.compressed_flag ? kFlagCompressed : 0;
  h.data_offset = align_up(kHeaderSize + kColumnEntrySize * columns.size(), kAlignment);
  std::uint64_t cursor = h.data_offset;
  std::vector<std::vector<std::uint64_t>> text_offsets(columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const TestColumn& in = columns[c];
    ColumnEntry entry;
    entry.name = in.name;
    entry.kind = in.text ? ColumnKind::text : ColumnKind::tensor;
    entry.dtype = in.text ? DType::u8 : in.dtype;
    if (!in.text && in.rank == 2) {
      entry.row_shape = {in.dim};
      entry.padded_dim = padded_dim_for(in.dim, in.dtype, 16);
    }
    entry.data_offset = align_up(cursor, kAlignment);
    if (in.text) {
      entry.data_size = (rows + 1) * 8;
      std::uint64_t total = 0;
      text_offsets[c].push_back(0);
      for (std::uint64_t r = first_row; r < first_row + rows; ++r) {
        total += in.texts[r].size();
        text_offsets[c].push_back(total);
      }
      entry.aux_offset = align_up(entry.data_offset + entry.data_size, kAlignment);
      entry.aux_size = total;
      cursor = entry.aux_offset + entry.aux_size;
    } else {
      entry.data_size = rows * entry.row_pitch_bytes();
      cursor = entry.data_offset + entry.data_size;
    }
    layout.columns.push_back(entry);
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
    if (in.text) {
      std::memcpy(out, text_offsets[c].data(), text_offsets[c].size() * 8);
      std::byte* text = file.data() + entry.aux_offset;
      for (std::uint64_t r = first_row; r < first_row + rows; ++r) {
        std::memcpy(text, in.texts[r].data(), in.texts[r].size());
        text += in.texts[r].size();
      }
    } else {
      const std::uint64_t logical = in.dim * dtype_size(in.dtype);
      for (std::uint64_t r = 0; r < rows; ++r)
        std::memcpy(out + r * entry.row_pitch_bytes(), in.values.data() + (first_row + r) * logical,
                    logical);
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
                               static_cast<std::uint64_t>(bytes.size()), layout.header.header_hash});
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
