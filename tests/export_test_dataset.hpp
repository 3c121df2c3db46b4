// A dataset with a column of every kind `gpucache export` writes, built with ShardBuilder (pack
// does not write images, sequences or dense rows yet): tests/test_export.cpp reads it directly,
// and tests/tools/make_export_dataset.cpp writes it for the Python tests
// (src/python/tests/test_export.py), which recompute every value from the formulas below.
//
//   image    u8   [3, 4, 5]   element i of row r: (7r + i) % 251
//   pixels   f32  [2, 3]      r + i / 8
//   patches  f32  [2, 3]      padded to 4 in the innermost dim: r - i / 4
//   embedding bf16 [5]        padded to 16: r % 32 + j / 4 - 2
//   half     f16  [3]         padded to 16: r / 2 + j
//   dense    f32  [7]         not padded (a rank-2 row whose pitch is no multiple of 16 bytes)
//                             10r + j
//   label    i64  scalar      7r - 3
//   flag     bool scalar      r % 3 == 0
//   tokens   i32  sequence    row r holds r % 4 values: 100r + k (rows 0, 4, 8, ... are empty)
//   weights  bf16 sequence    row r holds r % 3 values: r + k / 2
//   caption  text             "row r ✓", empty when r % 5 == 3
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "gpucache/shard/dataset_files.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard_io/shard_writer.hpp"

namespace gpucache::test::export_dataset {

inline std::uint8_t image(std::uint64_t r, std::uint64_t i) {
  return static_cast<std::uint8_t>((7 * r + i) % 251);
}
inline float pixels(std::uint64_t r, std::uint64_t i) {
  return static_cast<float>(r) + static_cast<float>(i) / 8;
}
inline float patches(std::uint64_t r, std::uint64_t i) {
  return static_cast<float>(r) - static_cast<float>(i) / 4;
}
inline float embedding(std::uint64_t r, std::uint64_t j) {
  return static_cast<float>(r % 32) + static_cast<float>(j) / 4 - 2;
}
inline float half(std::uint64_t r, std::uint64_t j) {
  return static_cast<float>(r) / 2 + static_cast<float>(j);
}
inline float dense(std::uint64_t r, std::uint64_t j) {
  return static_cast<float>(10 * r + j);
}
inline std::int64_t label(std::uint64_t r) {
  return static_cast<std::int64_t>(7 * r) - 3;
}
inline bool flag(std::uint64_t r) {
  return r % 3 == 0;
}
inline std::uint64_t tokens_in(std::uint64_t r) {
  return r % 4;
}
inline std::int32_t token(std::uint64_t r, std::uint64_t k) {
  return static_cast<std::int32_t>(100 * r + k);
}
inline std::uint64_t weights_in(std::uint64_t r) {
  return r % 3;
}
inline float weight(std::uint64_t r, std::uint64_t k) {
  return static_cast<float>(r) + static_cast<float>(k) / 2;
}
inline std::string caption(std::uint64_t r) {
  return r % 5 == 3 ? std::string() : "row " + std::to_string(r) + " \xE2\x9C\x93";
}

// Exact for the values above, which bf16 and f16 hold exactly (normal numbers or zero).
inline std::uint16_t to_bf16(float value) {
  return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(value) >> 16);
}
inline std::uint16_t to_f16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000);
  if ((bits & 0x7fffffff) == 0) return sign;
  const auto exponent = static_cast<std::uint16_t>(((bits >> 23) & 0xff) - 127 + 15);
  return static_cast<std::uint16_t>(sign | (exponent << 10) | ((bits >> 13) & 0x3ff));
}

inline std::vector<Column> columns() {
  return {
      {"image", ColumnKind::tensor, DType::u8, {3, 4, 5}, 5},
      {"pixels", ColumnKind::tensor, DType::f32, {2, 3}, 3},
      {"patches", ColumnKind::tensor, DType::f32, {2, 3}, 4},
      {"embedding", ColumnKind::tensor, DType::bf16, {5}, 16},
      {"half", ColumnKind::tensor, DType::f16, {3}, 16},
      {"dense", ColumnKind::tensor, DType::f32, {7}, 7},
      {"label", ColumnKind::tensor, DType::i64, {}, 1},
      {"flag", ColumnKind::tensor, DType::boolean, {}, 1},
      {"tokens", ColumnKind::sequence, DType::i32, {}, 0},
      {"weights", ColumnKind::sequence, DType::bf16, {}, 0},
      {"caption", ColumnKind::text, DType::u8, {}, 1},
  };
}

template <typename T>
void put(std::span<std::byte> region, std::uint64_t element, T value) {
  std::memcpy(region.data() + element * sizeof(T), &value, sizeof(T));
}

// Fills rows [first, first + rows) into a builder made for columns().
inline void fill(shard::ShardBuilder& builder, std::uint64_t first, std::uint64_t rows) {
  auto row_of = [&](std::size_t column, std::uint64_t r) {
    const auto pitch = builder.columns()[column].row_pitch_bytes();
    return builder.tensor_data(column).subspan(r * pitch, pitch);
  };
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::uint64_t row = first + r;
    for (std::uint64_t i = 0; i < 60; ++i) put(row_of(0, r), i, image(row, i));
    for (std::uint64_t i = 0; i < 6; ++i) put(row_of(1, r), i, pixels(row, i));
    for (std::uint64_t i = 0; i < 6; ++i) put(row_of(2, r), i / 3 * 4 + i % 3, patches(row, i));
    for (std::uint64_t j = 0; j < 5; ++j) put(row_of(3, r), j, to_bf16(embedding(row, j)));
    for (std::uint64_t j = 0; j < 3; ++j) put(row_of(4, r), j, to_f16(half(row, j)));
    for (std::uint64_t j = 0; j < 7; ++j) put(row_of(5, r), j, dense(row, j));
    put(row_of(6, r), 0, label(row));
    put(row_of(7, r), 0, static_cast<std::uint8_t>(flag(row)));
  }
  std::uint64_t tokens = 0, weights = 0, text = 0;
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::uint64_t row = first + r;
    builder.offsets(8)[r] = tokens;
    for (std::uint64_t k = 0; k < tokens_in(row); ++k)
      put(builder.values(8), tokens++, token(row, k));
    builder.offsets(9)[r] = weights;
    for (std::uint64_t k = 0; k < weights_in(row); ++k)
      put(builder.values(9), weights++, to_bf16(weight(row, k)));
    builder.offsets(10)[r] = text;
    const std::string words = caption(row);
    std::memcpy(builder.text_bytes(10).data() + text, words.data(), words.size());
    text += words.size();
  }
  builder.offsets(8)[rows] = tokens;
  builder.offsets(9)[rows] = weights;
  builder.offsets(10)[rows] = text;
}

// Sizes of the values of the variable-length columns for rows [first, first + rows).
inline std::vector<std::uint64_t> value_bytes(std::uint64_t first, std::uint64_t rows) {
  std::vector<std::uint64_t> bytes(columns().size(), 0);
  for (std::uint64_t row = first; row < first + rows; ++row) {
    bytes[8] += tokens_in(row) * 4;
    bytes[9] += weights_in(row) * 2;
    bytes[10] += caption(row).size();
  }
  return bytes;
}

// Writes `rows` rows as shards of `shard_rows` (at least one shard) and a manifest.json, as pack
// lays out a dataset directory. zstd_level > 0 compresses the chunks; chunks are 8 KiB so each
// shard has several.
inline void write(const std::filesystem::path& dir, std::uint64_t rows, std::uint64_t shard_rows,
                  int zstd_level = 0) {
  std::filesystem::create_directories(dir);
  const std::uint64_t shard_count = rows == 0 ? 1 : (rows + shard_rows - 1) / shard_rows;
  shard::Manifest manifest;
  manifest.tool_version = "test";
  manifest.rows = rows;
  manifest.columns = columns();
  for (std::uint64_t k = 0; k < shard_count; ++k) {
    const std::uint64_t first = k * shard_rows;
    const std::uint64_t count = std::min(shard_rows, rows - first);
    shard::ShardBuilder builder(columns(), count, value_bytes(first, count));
    fill(builder, first, count);
    shard::WriteOptions options;
    options.first_row = first;
    options.shard_index = static_cast<std::uint32_t>(k);
    options.shard_count = static_cast<std::uint32_t>(shard_count);
    options.dataset_rows = rows;
    options.dataset_id = 0xe4901;
    options.chunk_size = 2 * shard::kAlignment;
    options.zstd_level = zstd_level;
    const std::string name = shard::shard_file_name(static_cast<std::uint32_t>(k));
    const auto written = builder.write((dir / name).string(), options);
    manifest.shards.push_back({name, count, first, written.bytes, written.header_hash});
  }
  std::ofstream(dir / shard::kManifestName) << shard::manifest_to_text(manifest);
}

}  // namespace gpucache::test::export_dataset
