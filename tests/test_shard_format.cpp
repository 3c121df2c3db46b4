#include <doctest/doctest.h>

#include <unistd.h>
#include <algorithm>

#include <cstring>
#include <random>
#include <thread>

#include "gpucache/common/hash.hpp"
#include "gpucache/error.hpp"
#include "gpucache/shard/shard_layout.hpp"
#include "gpucache/shard_io/shard_reader.hpp"
#include "gpucache/shard_io/shard_writer.hpp"
#include "test_support.hpp"

using namespace gpucache;
using namespace gpucache::shard;

namespace {

std::vector<DType> all_dtypes() {
  return {DType::f32, DType::f16, DType::bf16,    DType::f64, DType::i64, DType::i32, DType::i16,
          DType::i8,  DType::u8,  DType::boolean, DType::u16, DType::u32, DType::u64};
}

// A shard with one rank-2 column of every dtype plus a text column, filled with random bytes.
struct Sample {
  std::vector<Column> specs;
  std::vector<std::vector<std::byte>> logical;  // per tensor column, rows × dim × size
  std::vector<std::string> texts;
};

Sample make_sample(std::uint64_t rows, std::uint64_t dim, std::uint64_t pad_to) {
  Sample sample;
  std::mt19937 random(42);
  for (DType dtype : all_dtypes()) {
    Column spec{std::string("col_") + std::string(dtype_name(dtype)),
                ColumnKind::tensor,
                dtype,
                {dim},
                padded_dim_for(dim, dtype, pad_to)};
    sample.specs.push_back(spec);
    std::vector<std::byte> bytes(rows * dim * dtype_size(dtype));
    for (auto& b : bytes)
      b = static_cast<std::byte>(dtype == DType::boolean ? random() & 1 : random() & 0xff);
    sample.logical.push_back(std::move(bytes));
  }
  sample.specs.push_back({"text", ColumnKind::text, DType::u8, {}, 1});
  for (std::uint64_t r = 0; r < rows; ++r)
    sample.texts.push_back(std::string(r % 7, static_cast<char>('a' + r % 26)) + "é");
  return sample;
}

enum class Fill { anonymous, file_backed, file_backed_store, file_written_then_hashed };

std::string write_sample(const Sample& sample, std::uint64_t rows, const std::string& path,
                         WriteOptions options = {}, Fill fill = Fill::anonymous) {
  std::uint64_t text_total = 0;
  for (const auto& text : sample.texts) text_total += text.size();
  std::vector<std::uint64_t> text_bytes(sample.specs.size(), 0);
  text_bytes.back() = text_total;
  ShardBuilder builder = fill == Fill::anonymous
                             ? ShardBuilder(sample.specs, rows, text_bytes)
                             : ShardBuilder(sample.specs, rows, text_bytes, path);
  CHECK(builder.file_backed() == (fill != Fill::anonymous));
  for (std::size_t c = 0; c + 1 < sample.specs.size(); ++c) {
    const auto& column = builder.columns()[c];
    const std::uint64_t row_bytes = column.dim() * dtype_size(column.dtype);
    std::vector<std::byte> padded(rows * column.row_pitch_bytes());
    for (std::uint64_t r = 0; r < rows; ++r)
      std::memcpy(padded.data() + r * column.row_pitch_bytes(),
                  sample.logical[c].data() + r * row_bytes, row_bytes);
    if (fill == Fill::file_written_then_hashed) {
      // Written and hashed in two calls, as pack's two threads do.
      builder.write_stored(c, 0, padded);
      builder.hash_stored(c, 0, padded);
      builder.start_writeback(c, 0, padded.size());
    } else if (fill == Fill::file_backed_store && c % 2 == 0) {
      // In two pieces, the second at an offset inside the region.
      const std::uint64_t half = rows / 2 * column.row_pitch_bytes();
      builder.store(c, 0, std::span(padded).first(half));
      builder.store(c, half, std::span(padded).subspan(half));
    } else {
      std::memcpy(builder.tensor_data(c).data(), padded.data(), padded.size());
    }
  }
  const std::size_t text_column = sample.specs.size() - 1;
  std::uint64_t cursor = 0;
  for (std::uint64_t r = 0; r < rows; ++r) {
    builder.text_offsets(text_column)[r] = cursor;
    std::memcpy(builder.text_bytes(text_column).data() + cursor, sample.texts[r].data(),
                sample.texts[r].size());
    cursor += sample.texts[r].size();
  }
  builder.text_offsets(text_column)[rows] = cursor;
  builder.write(path, options);
  return path;
}

void check_round_trip(const Sample& sample, std::uint64_t rows, const ShardReader& reader) {
  REQUIRE(reader.rows() == rows);
  for (std::size_t c = 0; c + 1 < sample.specs.size(); ++c) {
    const auto& column = reader.layout().columns[c];
    CAPTURE(column.name);
    CHECK(column.dtype == sample.specs[c].dtype);
    const std::uint64_t row_bytes = column.dim() * dtype_size(column.dtype);
    const auto data = reader.tensor_data(c);
    for (std::uint64_t r = 0; r < rows; ++r) {
      CHECK(std::memcmp(data.data() + r * column.row_pitch_bytes(),
                        sample.logical[c].data() + r * row_bytes, row_bytes) == 0);
      for (std::uint64_t b = row_bytes; b < column.row_pitch_bytes(); ++b)
        CHECK(data[r * column.row_pitch_bytes() + b] == std::byte{0});
    }
  }
  for (std::uint64_t r = 0; r < rows; ++r)
    CHECK(reader.text(sample.specs.size() - 1, r) == sample.texts[r]);
}

}  // namespace

TEST_CASE("every dtype round-trips through a shard, uncompressed and compressed") {
  test_support::ScratchDir scratch;
  const std::uint64_t rows = 37, dim = 5;
  const Sample sample = make_sample(rows, dim, 16);
  check_round_trip(sample, rows, ShardReader(write_sample(sample, rows, scratch / "plain.gcs")));
  WriteOptions compressed;
  compressed.zstd_level = 3;
  compressed.chunk_size = 4096;
  check_round_trip(sample, rows,
                   ShardReader(write_sample(sample, rows, scratch / "zstd.gcs", compressed)));
}

TEST_CASE("columns start on 4096-byte boundaries and rows are padded to 16 elements and 16 bytes") {
  test_support::ScratchDir scratch;
  const Sample sample = make_sample(9, 3, 16);
  ShardReader reader(write_sample(sample, 9, scratch / "s.gcs"));
  for (const auto& column : reader.layout().columns) {
    CAPTURE(column.name);
    CHECK(column.data_offset % 4096 == 0);
    if (column.kind == ColumnKind::text) {
      CHECK(column.aux_offset % 4096 == 0);
      continue;
    }
    CHECK(column.padded_dim % 16 == 0);
    CHECK(column.row_pitch_bytes() % 16 == 0);
  }
}

TEST_CASE("padded_dim follows --pad-to and the 16-byte rule") {
  CHECK(padded_dim_for(100, DType::f32, 16) == 112);
  CHECK(padded_dim_for(384, DType::f16, 16) == 384);
  CHECK(padded_dim_for(1, DType::f32, 1) == 4);  // 16 bytes at least
  CHECK(padded_dim_for(5, DType::f64, 1) == 6);  // 48 bytes
  CHECK(padded_dim_for(3, DType::u8, 8) == 16);  // 8 elements would be 8 bytes
  CHECK(padded_dim_for(10, DType::f16, 8) == 16);
  CHECK_THROWS_AS(padded_dim_for(10, DType::f32, 0), Error);
}

TEST_CASE("chunk hashes are XXH3-64 of each fixed-size piece of the data region") {
  test_support::ScratchDir scratch;
  const Sample sample = make_sample(300, 40, 16);
  WriteOptions options;
  options.chunk_size = 8192;
  write_sample(sample, 300, scratch / "s.gcs", options);
  const auto bytes = test_support::read_bytes(scratch / "s.gcs");
  const auto file = std::as_bytes(std::span(bytes.data(), bytes.size()));
  const auto layout = decode_layout(file, "s.gcs");
  REQUIRE(layout.chunks.size() > 3);
  for (std::uint64_t k = 0; k < layout.chunks.size(); ++k) {
    const auto piece =
        file.subspan(layout.header.data_offset + k * 8192, chunk_logical_size(layout.header, k));
    CHECK(layout.chunks[k].hash == gpucache::detail::xxh3_64(piece));
    CHECK(chunk_hash(file, layout, k, "shard") == layout.chunks[k].hash);
  }
}

TEST_CASE("identical content gives identical bytes, whatever the thread count") {
  test_support::ScratchDir scratch;
  const Sample sample = make_sample(50, 17, 16);
  WriteOptions one, many;
  one.threads = 1;
  many.threads = 8;
  one.chunk_size = many.chunk_size = 4096;
  write_sample(sample, 50, scratch / "a.gcs", one);
  write_sample(sample, 50, scratch / "b.gcs", many);
  CHECK(test_support::read_bytes(scratch / "a.gcs") == test_support::read_bytes(scratch / "b.gcs"));
}

TEST_CASE(
    "decode_layout refuses every flipped byte outside the data region, truncation and extension") {
  test_support::ScratchDir scratch;
  const Sample sample = make_sample(5, 4, 16);
  write_sample(sample, 5, scratch / "s.gcs");
  const auto original = test_support::read_bytes(scratch / "s.gcs");
  const auto layout =
      decode_layout(std::as_bytes(std::span(original.data(), original.size())), "s.gcs");
  auto decodes = [](std::vector<char> bytes) {
    try {
      decode_layout(std::as_bytes(std::span(bytes.data(), bytes.size())), "s.gcs");
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  std::vector<std::uint64_t> positions;
  for (std::uint64_t at = 0; at < layout.header.data_offset; ++at) positions.push_back(at);
  for (std::uint64_t at = layout.header.data_offset + layout.header.stored_data_size;
       at < original.size(); ++at)
    positions.push_back(at);
  for (std::uint64_t at : positions) {
    auto corrupted = original;
    corrupted[at] = static_cast<char>(corrupted[at] ^ 0x10);
    CAPTURE(at);
    CHECK_FALSE(decodes(corrupted));
  }
  CHECK_FALSE(decodes({original.begin(), original.end() - 1}));
  auto extended = original;
  extended.push_back(0);
  CHECK_FALSE(decodes(extended));
  CHECK(decodes(original));
}

TEST_CASE("header dataset fields (format 1.1): written, checked, and absent from 1.0 headers") {
  Header header;
  header.row_count = 10;
  header.first_row = 20;
  header.shard_index = 2;
  header.shard_count = 3;
  header.dataset_rows = 30;
  header.dataset_id = 0x0123456789abcdefULL;
  // decode_header wants a file at least as long as a header and a footer.
  auto as_file = [](const auto& header_bytes) {
    std::vector<std::byte> file(kAlignment);
    std::memcpy(file.data(), header_bytes.data(), header_bytes.size());
    return file;
  };
  auto decode = [&](const Header& h) { return decode_header(as_file(encode_header(h)), "h.gcs"); };
  const Header decoded = decode(header);
  CHECK(decoded.version_minor == 1);
  CHECK(decoded.shard_count == 3);
  CHECK(decoded.dataset_rows == 30);
  CHECK(decoded.dataset_id == 0x0123456789abcdefULL);

  auto refusal = [&](Header h) {
    try {
      decode(h);
      return std::string();
    } catch (const Error& error) {
      return std::string(error.what());
    }
  };
  Header bad = header;
  bad.shard_count = 2;
  CHECK(refusal(bad).find("shard_index 2 is not below shard_count 2") != std::string::npos);
  bad = header;
  bad.dataset_rows = 29;
  CHECK(refusal(bad).find("past dataset_rows 29") != std::string::npos);

  // A 1.0 header keeps bytes 136-247 zero and decodes without dataset fields.
  Header old = header;
  old.version_minor = 0;
  const auto old_bytes = encode_header(old);
  CHECK(std::all_of(old_bytes.begin() + 136, old_bytes.begin() + 248,
                    [](std::byte b) { return b == std::byte{0}; }));
  const Header old_decoded = decode_header(as_file(old_bytes), "h.gcs");
  CHECK_FALSE(old_decoded.has_dataset_fields());
  CHECK(old_decoded.shard_count == 0);

  // A later 1.x may use the bytes this reader treats as reserved; 1.1 itself may not.
  auto future_bytes = encode_header(header);
  future_bytes[200] = std::byte{1};
  future_bytes[10] = std::byte{kVersionMinor + 1};  // a minor version this code does not know
  auto rehash = [](auto& bytes) {
    const auto hash = gpucache::detail::xxh3_64(std::span(bytes).first(248));
    std::memcpy(bytes.data() + 248, &hash, 8);
  };
  rehash(future_bytes);
  CHECK(decode_header(as_file(future_bytes), "h.gcs").version_minor == kVersionMinor + 1);
  future_bytes[10] = std::byte{kVersionMinor};
  rehash(future_bytes);
  CHECK_THROWS_AS(decode_header(as_file(future_bytes), "h.gcs"), Error);
}

TEST_CASE("a file-backed builder writes the same bytes as an anonymous one") {
  test_support::ScratchDir scratch;
  const Sample sample = make_sample(300, 7, 21);
  write_sample(sample, 300, scratch / "anonymous.gcs");
  write_sample(sample, 300, scratch / "backed.gcs", {}, Fill::file_backed);
  write_sample(sample, 300, scratch / "stored.gcs", {}, Fill::file_backed_store);
  const auto expected = test_support::read_bytes(scratch / "anonymous.gcs");
  CHECK(test_support::read_bytes(scratch / "backed.gcs") == expected);
  CHECK(test_support::read_bytes(scratch / "stored.gcs") == expected);
  write_sample(sample, 300, scratch / "copied.gcs", {}, Fill::file_written_then_hashed);
  CHECK(test_support::read_bytes(scratch / "copied.gcs") == expected);
  CHECK_FALSE(std::filesystem::exists(scratch / "backed.gcs.tmp"));
  check_round_trip(sample, 300, ShardReader(scratch / "stored.gcs", true));

  // The image lives in the temporary file: it cannot be written compressed or elsewhere, and a
  // builder dropped before write() leaves nothing behind.
  const std::vector<std::uint64_t> no_text(sample.specs.size(), 0);
  {
    ShardBuilder builder(sample.specs, 10, no_text, scratch / "other.gcs");
    CHECK(std::filesystem::exists(scratch / "other.gcs.tmp"));
    WriteOptions compressed;
    compressed.zstd_level = 3;
    CHECK_THROWS_AS(builder.write(scratch / "other.gcs", compressed), Error);
    CHECK_THROWS_AS(builder.write(scratch / "elsewhere.gcs", {}), Error);
    CHECK_THROWS_AS(builder.store(0, builder.columns()[0].data_size, std::vector<std::byte>(1)),
                    Error);
  }
  CHECK_FALSE(std::filesystem::exists(scratch / "other.gcs.tmp"));
  CHECK_FALSE(std::filesystem::exists(scratch / "other.gcs"));
}

TEST_CASE("chunks hashed as they are stored match the bytes written") {
  // One f32 column of 3 default-size chunks and a bit: whole chunks are hashed by store(), the
  // rest by write(); the file must be the same as from an anonymous image filled in place.
  test_support::ScratchDir scratch;
  const std::vector<Column> specs = {{"embedding", ColumnKind::tensor, DType::f32, {1024}, 1024},
                                     {"id", ColumnKind::tensor, DType::u64, {}, 1}};
  const std::uint64_t pitch = 4096, rows = 3 * kDefaultChunkSize / pitch + 77;
  std::vector<std::byte> embedding(rows * pitch), ids(rows * 8);
  std::mt19937 random(7);
  for (auto& b : embedding) b = static_cast<std::byte>(random() & 0xff);
  for (auto& b : ids) b = static_cast<std::byte>(random() & 0xff);
  const std::vector<std::uint64_t> no_text(2, 0);

  auto finish = [&](ShardBuilder& builder, const std::string& name) {
    std::memcpy(builder.tensor_data(1).data(), ids.data(), ids.size());
    builder.write(scratch / name, {});
    return test_support::read_bytes(scratch / name);
  };
  ShardBuilder in_place(specs, rows, no_text);
  std::memcpy(in_place.tensor_data(0).data(), embedding.data(), embedding.size());
  const auto expected = finish(in_place, "in_place.gcs");

  SUBCASE("in order, in uneven pieces") {
    ShardBuilder builder(specs, rows, no_text, scratch / "pieces.gcs");
    for (std::uint64_t at = 0; at < embedding.size(); at += 3 * pitch + 4096 * 7)
      builder.store(0, at,
                    std::span(embedding).subspan(
                        at, std::min<std::uint64_t>(3 * pitch + 4096 * 7, embedding.size() - at)));
    CHECK(finish(builder, "pieces.gcs") == expected);
  }
  SUBCASE("backwards, and one chunk stored twice with other bytes first") {
    ShardBuilder builder(specs, rows, no_text, scratch / "backwards.gcs");
    std::vector<std::byte> wrong(kDefaultChunkSize, std::byte{1});
    builder.store(0, kDefaultChunkSize, wrong);
    for (std::uint64_t at = embedding.size(); at > 0;) {
      const std::uint64_t size = std::min<std::uint64_t>(at, 1 << 20);
      at -= size;
      builder.store(0, at, std::span(embedding).subspan(at, size));
    }
    CHECK(finish(builder, "backwards.gcs") == expected);
  }
  SUBCASE("written on one thread while hashed on another, as pack does") {
    for (const bool file_backed : {true, false}) {
      CAPTURE(file_backed);
      ShardBuilder builder = file_backed
                                 ? ShardBuilder(specs, rows, no_text, scratch / "threads.gcs")
                                 : ShardBuilder(specs, rows, no_text);
      std::thread writing([&] {
        for (std::uint64_t at = 0; at < embedding.size(); at += 1 << 20) {
          const std::uint64_t size = std::min<std::uint64_t>(1 << 20, embedding.size() - at);
          builder.write_stored(0, at, std::span(embedding).subspan(at, size));
        }
      });
      builder.hash_stored(0, 0, embedding);
      writing.join();
      CHECK(finish(builder, "threads.gcs") == expected);
    }
  }
  SUBCASE("rows lying apart, written on one thread while hashed on another, as pack does") {
    // Each row copied to a heap block of its own (as a tensor per row lies in a .pt file), and in
    // blocks of more rows than one vectored write takes (IOV_MAX), for both kinds of image.
    std::vector<std::vector<std::byte>> apart(rows);
    std::vector<const std::byte*> pointers(rows);
    for (std::uint64_t r = 0; r < rows; ++r) {
      apart[r].assign(embedding.begin() + static_cast<std::ptrdiff_t>(r * pitch),
                      embedding.begin() + static_cast<std::ptrdiff_t>((r + 1) * pitch));
      pointers[r] = apart[r].data();
    }
    for (const bool file_backed : {true, false}) {
      CAPTURE(file_backed);
      ShardBuilder builder = file_backed ? ShardBuilder(specs, rows, no_text, scratch / "apart.gcs")
                                         : ShardBuilder(specs, rows, no_text);
      const std::uint64_t block = 1100;
      for (std::uint64_t first = 0; first < rows; first += block) {
        const auto rows_here = std::span(pointers).subspan(first, std::min(block, rows - first));
        std::thread writing([&] { builder.write_rows(0, first * pitch, rows_here, pitch); });
        builder.hash_rows(0, first * pitch, rows_here, pitch);
        writing.join();
      }
      CHECK(finish(builder, "apart.gcs") == expected);
    }
  }
  SUBCASE("written without hashing: write() hashes what was written") {
    ShardBuilder builder(specs, rows, no_text, scratch / "written.gcs");
    builder.write_stored(0, 0, embedding);
    CHECK(finish(builder, "written.gcs") == expected);
  }
  CHECK(ShardReader(scratch / "in_place.gcs", true).rows() == rows);
}

TEST_CASE("format 1.2: rank-2 rows beside rank-3 rows and sequences round-trip (row-shape table)") {
  // With a row-shape table present, a rank-2 column's entry is [dim] (SPEC.md "Row-shape table":
  // rank r has r - 1 non-zero dimensions), as the writer writes it; the decoder must accept it.
  test_support::ScratchDir scratch;
  const std::vector<Column> specs{
      {"embedding", ColumnKind::tensor, DType::f32, {5}, padded_dim_for(5, DType::f32, 16)},
      {"image", ColumnKind::tensor, DType::u8, {3, 2, 2}, 2},
      {"label", ColumnKind::tensor, DType::i64, {}, 1},
      {"tokens", ColumnKind::sequence, DType::i32, {}, 0}};
  const std::uint64_t rows = 3;
  ShardBuilder builder(specs, rows, {0, 0, 0, 3 * 4});
  for (std::uint64_t r = 0; r < rows; ++r) {
    const float value = static_cast<float>(r) + 0.5f;
    std::memcpy(builder.tensor_data(0).data() + r * 64, &value, 4);
    builder.tensor_data(1)[r * 12 + 11] = static_cast<std::byte>(r + 1);
  }
  // Rows hold 0, 1 and 2 tokens.
  const std::uint64_t offsets[4] = {0, 0, 1, 3};
  std::copy(std::begin(offsets), std::end(offsets), builder.offsets(3).begin());
  const std::int32_t tokens[3] = {7, 8, 9};
  std::memcpy(builder.values(3).data(), tokens, sizeof tokens);
  const std::string path = scratch / "mixed.gcs";
  builder.write(path, {});
  const ShardReader reader(path);
  CHECK(reader.layout().header.version_minor == kVersionMinorRowShapes);
  CHECK(reader.layout().header.has_row_shapes());
  const auto& columns = reader.layout().columns;
  CHECK(columns[0].row_shape == std::vector<std::uint64_t>{5});
  CHECK(columns[1].row_shape == std::vector<std::uint64_t>{3, 2, 2});
  CHECK(columns[2].row_shape.empty());
  float second = 0;
  std::memcpy(&second, reader.tensor_data(0).data() + 64, 4);
  CHECK(second == 1.5f);
  CHECK(reader.tensor_data(1)[2 * 12 + 11] == std::byte{3});
  CHECK(reader.values(3, 0).empty());
  CHECK(reader.values(3, 1).size() == 4);
  CHECK(reader.values(3, 2).size() == 8);
}

namespace {

// A shard of the given columns (a label i64 value per row, a 3×2×2 u8 image when asked), as bytes.
std::vector<std::byte> long_name_shard(const std::vector<std::string>& names, bool image,
                                       const std::string& path) {
  std::vector<Column> specs;
  for (const auto& name : names) specs.push_back({name, ColumnKind::tensor, DType::i64, {}, 1});
  if (image) specs.push_back({"image", ColumnKind::tensor, DType::u8, {3, 2, 2}, 2});
  const std::uint64_t rows = 2;
  ShardBuilder builder(specs, rows, std::vector<std::uint64_t>(specs.size(), 0));
  for (std::size_t c = 0; c < names.size(); ++c)
    for (std::uint64_t r = 0; r < rows; ++r)
      builder.tensor_data(c)[r * 8] = static_cast<std::byte>(10 * c + r + 1);
  builder.write(path, {});
  const auto chars = test_support::read_bytes(path);
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

void store_u64_at(std::vector<std::byte>& bytes, std::uint64_t offset, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes[offset + i] = static_cast<std::byte>(value >> (8 * i));
}

// After an edit of the header's flags or of the tables: columns_hash, header_hash and the
// footer's copy of it recomputed, so the decoder reaches the structural rule under test.
void rehash_shard(std::vector<std::byte>& bytes, std::uint64_t tables_size) {
  store_u64_at(bytes, 120,
               gpucache::detail::xxh3_64(std::span(bytes).subspan(kHeaderSize, tables_size)));
  store_u64_at(bytes, 248, gpucache::detail::xxh3_64(std::span(bytes).first(248)));
  const std::uint64_t footer = bytes.size() - kFooterSize;
  std::memcpy(bytes.data() + footer + 16, bytes.data() + 248, 8);
  store_u64_at(bytes, footer + 24, gpucache::detail::xxh3_64(std::span(bytes).subspan(footer, 24)));
}

std::string decode_error(const std::vector<std::byte>& bytes) {
  try {
    (void)decode_layout(bytes, "n.gcs");
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE(
    "format 1.3: names of up to 255 bytes live in the names table, written only when needed") {
  test_support::ScratchDir scratch;
  std::string long_name;  // 208 bytes of two-byte UTF-8 and ASCII
  while (long_name.size() < 200) long_name += "\xc3\xa9tiquette_";
  const std::string longest(255, 'n');
  const std::string short_name(63, 's');  // the longest name the column table holds itself
  const std::vector<std::string> names{long_name, short_name, "label", longest};

  const auto bytes = long_name_shard(names, true, scratch / "long.gcs");
  const ShardReader reader(scratch / "long.gcs");
  const auto& header = reader.layout().header;
  CHECK(header.version_minor == kVersionMinorLongNames);
  CHECK(header.has_names_table());
  CHECK(header.has_row_shapes());
  REQUIRE(reader.layout().columns.size() == 5);
  for (std::size_t c = 0; c < names.size(); ++c) {
    CHECK(reader.layout().columns[c].name == names[c]);
    CHECK(std::to_integer<int>(reader.tensor_data(c)[8]) == static_cast<int>(10 * c + 2));
  }
  CHECK(reader.layout().columns[4].row_shape == std::vector<std::uint64_t>{3, 2, 2});
  // SPEC.md "Names table": after the column and row-shape tables, every name, short ones too;
  // the column table's field holds a short name and is zero for a long one.
  const std::uint64_t names_table = kHeaderSize + 5 * (kColumnEntrySize + kRowShapeEntrySize);
  CHECK(std::memcmp(bytes.data() + names_table, long_name.data(), long_name.size()) == 0);
  CHECK(std::memcmp(bytes.data() + names_table + 2 * kNameEntrySize, "label\0", 6) == 0);
  CHECK(std::memcmp(bytes.data() + names_table + 3 * kNameEntrySize, longest.data(), 255) == 0);
  CHECK(bytes[names_table + 4 * kNameEntrySize - 1] == std::byte{0});
  CHECK(std::all_of(bytes.begin() + kHeaderSize, bytes.begin() + kHeaderSize + 64,
                    [](std::byte b) { return b == std::byte{0}; }));
  CHECK(std::memcmp(bytes.data() + kHeaderSize + kColumnEntrySize, short_name.data(), 63) == 0);
  CHECK(std::memcmp(bytes.data() + kHeaderSize + 2 * kColumnEntrySize, "label\0", 6) == 0);

  SUBCASE("names of 63 bytes or fewer keep the 1.1 and 1.2 encodings (no names table)") {
    const auto plain = long_name_shard({short_name, "label"}, false, scratch / "plain.gcs");
    const ShardReader plain_reader(scratch / "plain.gcs");
    CHECK(plain_reader.layout().header.version_minor == kVersionMinorDatasetFields);
    CHECK(plain_reader.layout().header.flags == 0);
    const auto shaped = long_name_shard({"label"}, true, scratch / "shaped.gcs");
    CHECK(ShardReader(scratch / "shaped.gcs").layout().header.version_minor ==
          kVersionMinorRowShapes);
    CHECK(ShardReader(scratch / "shaped.gcs").layout().header.flags == kFlagRowShapes);
  }
  SUBCASE("a name of 256 bytes or an empty one is refused, naming the column") {
    ColumnEntry column;
    column.name = std::string(256, 'x');
    CHECK_THROWS_WITH(encode_column(column), doctest::Contains("name must be 1 to 255 bytes"));
    column.name.clear();
    CHECK_THROWS_WITH(encode_column(column), doctest::Contains("name must be 1 to 255 bytes"));
  }

  // Every edit below is rehashed, so only the rule under test can refuse it.
  const std::uint64_t tables_size = *column_tables_size(header);
  SUBCASE("a names-table name that is not UTF-8") {
    auto bad = bytes;
    bad[names_table + 1] = std::byte{0xff};
    rehash_shard(bad, tables_size);
    CHECK(decode_error(bad).find("names table entry 0") != std::string::npos);
    CHECK(decode_error(bad).find("not UTF-8") != std::string::npos);
  }
  SUBCASE("a 256-byte name (no terminating zero in the entry)") {
    auto bad = bytes;
    bad[names_table + 4 * kNameEntrySize - 1] = std::byte{'n'};
    rehash_shard(bad, tables_size);
    CHECK(decode_error(bad).find("names table entry 3") != std::string::npos);
  }
  SUBCASE("a long name's column-table field that is not zero") {
    auto bad = bytes;
    bad[kHeaderSize] = std::byte{'x'};
    rehash_shard(bad, tables_size);
    CHECK(decode_error(bad).find("name over 63 bytes is not zero") != std::string::npos);
  }
  SUBCASE("a short name's column-table field that differs from the names table") {
    auto bad = bytes;
    bad[kHeaderSize + 2 * kColumnEntrySize] = std::byte{'L'};
    rehash_shard(bad, tables_size);
    CHECK(decode_error(bad).find("differs from the names table") != std::string::npos);
  }
  SUBCASE("two long names that are the same") {
    auto bad = bytes;
    std::memcpy(bad.data() + names_table + 3 * kNameEntrySize, long_name.data(), long_name.size());
    std::fill(bad.begin() +
                  static_cast<std::ptrdiff_t>(names_table + 3 * kNameEntrySize + long_name.size()),
              bad.begin() + static_cast<std::ptrdiff_t>(names_table + 4 * kNameEntrySize),
              std::byte{0});
    rehash_shard(bad, tables_size);
    CHECK(decode_error(bad).find("column name appears twice") != std::string::npos);
  }
  SUBCASE("the names flag in a shard of minor version 2 (what a 1.2 reader sees)") {
    auto bad = bytes;
    bad[10] = std::byte{kVersionMinorRowShapes};
    rehash_shard(bad, tables_size);
    CHECK(decode_error(bad).find("unknown flags are set") != std::string::npos);
  }
}
