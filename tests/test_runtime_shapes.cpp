// The runtime reader and shard format 1.2: tensor columns of any row shape and pitch (a [3, 4, 5]
// u8 image, a dense [7] f32 row, a scalar i64, a padded embedding) and sequence columns (i32 and
// i64, with empty rows), on the host and on the device (the fake CUDA runtime, as in
// test_runtime_device.cpp): values equal what was written, across shards and selections, and
// corrupt sequence offsets are refused whether or not the load verifies.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <span>

#include "fake_cudart/fake_cudart.h"
#include "gpucache/runtime.hpp"
#include "runtime_test_shards.hpp"

using namespace gpucache;
using namespace gpucache::runtime;
using gpucache::test::TempDir;

namespace {

// Before the first CUDA use in this process: the runtime resolves its CUDA library once.
const bool fake_selected = (::setenv("GPUCACHE_CUDART", GPUCACHE_FAKE_CUDART, 1), true);

std::vector<test::TestColumn> shape_columns(std::uint64_t rows) {
  return {test::u8_image_column("image", rows, {3, 4, 5}),
          test::dense_f32_column("dense", rows, 7),
          test::i64_column("label", rows),
          test::f32_column("emb", rows, 3),
          test::i32_sequence_column("tokens", rows),
          test::i64_sequence_column("ids", rows),
          test::text_column("caption", rows)};
}

const test::TestColumn& written(const std::vector<test::TestColumn>& columns,
                                const std::string& name) {
  for (const auto& column : columns)
    if (column.column.name == name) return column;
  FAIL("no column " << name);
  return columns.front();
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const gpucache::Error& error) {
    return error.what();
  }
  return "(no error)";
}

// `expected.size()` bytes at `at` equal `expected` (an empty row has no data pointer to compare).
bool same_bytes(const std::byte* at, std::span<const std::byte> expected) {
  return expected.empty() || std::memcmp(at, expected.data(), expected.size()) == 0;
}

std::uint64_t u64_at(const std::byte* at) {
  std::uint64_t value = 0;
  std::memcpy(&value, at, 8);
  return value;
}

// Every tensor column of `data` (rows [first_row, ...) of the dataset) holds the stored rows that
// were written, padding zero, in its pieces and, when joined, in its joined view (whose presence
// must equal `expect_joined` when given).
void check_host_tensors(const HostData& data, const std::vector<test::TestColumn>& columns,
                        std::uint64_t first_row, std::optional<bool> expect_joined) {
  for (const Column& column : data.columns()) {
    if (column.kind != ColumnKind::tensor) continue;
    CAPTURE(column.name);
    const auto& in = written(columns, column.name);
    std::uint64_t row = 0;
    for (const HostPiece& piece : data.pieces(column.name)) {
      CHECK(piece.first_row == row);
      for (std::uint64_t r = 0; r < piece.rows; ++r, ++row) {
        const auto expected = test::stored_row(in, first_row + row);
        REQUIRE(expected.size() == column.row_pitch_bytes());
        CHECK(same_bytes(piece.data + r * expected.size(), expected));
      }
    }
    CHECK(row == data.rows());
    const std::byte* joined = data.joined(column.name);
    if (expect_joined) CHECK((joined != nullptr) == *expect_joined);
    if (joined)
      for (std::uint64_t r = 0; r < data.rows(); ++r) {
        const auto expected = test::stored_row(in, first_row + r);
        CHECK(same_bytes(joined + r * expected.size(), expected));
      }
  }
}

// Every text and sequence column of `data`: each row's values, through the pieces' offsets and
// through row_values, equal what was written.
void check_host_sequences(const HostData& data, const std::vector<test::TestColumn>& columns,
                          std::uint64_t first_row) {
  for (const Column& column : data.columns()) {
    if (!column.variable_length()) continue;
    CAPTURE(column.name);
    const auto& in = written(columns, column.name);
    const std::uint64_t itemsize = dtype_size(column.dtype);
    std::uint64_t row = 0;
    for (const HostPiece& piece : data.pieces(column.name)) {
      REQUIRE(piece.values != nullptr);
      CHECK(piece.text_bytes == (column.kind == ColumnKind::text ? piece.values : nullptr));
      for (std::uint64_t r = 0; r < piece.rows; ++r, ++row) {
        const auto expected = in.row_bytes(first_row + row);
        const std::uint64_t begin = u64_at(piece.data + r * 8),
                            end = u64_at(piece.data + r * 8 + 8);
        REQUIRE((end - begin) * itemsize == expected.size());
        CHECK(same_bytes(piece.values + begin * itemsize, expected));
        const auto values = data.row_values(column.name, row);
        REQUIRE(values.size() == expected.size());
        CHECK(same_bytes(values.data(), expected));
      }
    }
    CHECK(row == data.rows());
    CHECK(data.joined(column.name) == nullptr);
  }
}

// The device copy: tensor columns byte for byte as stored; sequence columns as their selected
// values back to back with rows + 1 int64 offsets rebased to them.
void check_device(const DeviceData& device, const std::vector<test::TestColumn>& columns,
                  std::uint64_t first_row) {
  for (const DeviceColumn& column : device.columns()) {
    CAPTURE(column.column.name);
    CHECK(column.offset % 4096 == 0);
    const auto& in = written(columns, column.column.name);
    const auto* data = static_cast<const std::byte*>(column.data);  // fake device = host memory
    if (column.column.kind == ColumnKind::tensor) {
      CHECK(column.offsets == nullptr);
      CHECK(column.bytes == device.rows() * column.column.row_pitch_bytes());
      for (std::uint64_t r = 0; r < device.rows(); ++r) {
        const auto expected = test::stored_row(in, first_row + r);
        CHECK(same_bytes(data + r * expected.size(), expected));
      }
      continue;
    }
    REQUIRE(column.column.kind == ColumnKind::sequence);
    REQUIRE(column.offsets != nullptr);
    CHECK(column.offsets_offset % 4096 == 0);
    const std::uint64_t itemsize = dtype_size(column.column.dtype);
    CHECK(column.offsets[0] == 0);
    std::uint64_t values = 0;
    for (std::uint64_t r = 0; r < device.rows(); ++r) {
      const auto expected = in.row_bytes(first_row + r);
      CHECK(static_cast<std::uint64_t>(column.offsets[r]) == values);
      REQUIRE(static_cast<std::uint64_t>(column.offsets[r + 1] - column.offsets[r]) * itemsize ==
              expected.size());
      CHECK(same_bytes(data + values * itemsize, expected));
      values += expected.size() / itemsize;
    }
    CHECK(static_cast<std::uint64_t>(column.offsets[device.rows()]) == values);
    CHECK(column.values == values);
    CHECK(column.bytes == values * itemsize);
  }
}

void check_nothing_left() {
  const FakeCudaStats stats = fake_cuda_stats();
  CHECK(stats.live_device_allocations == 0);
  CHECK(stats.live_host_allocations == 0);
  CHECK(stats.live_registrations == 0);
  CHECK(stats.pending_copies == 0);
  CHECK(stats.misuse == 0);
  CHECK(std::string(fake_cuda_last_misuse()) == "");
}

std::uint64_t column_entry_offset(const std::filesystem::path& shard_path, const std::string& name,
                                  bool aux = false) {
  const auto bytes = test::read_bytes(shard_path.string());
  for (const auto& column : shard::decode_layout(bytes, shard_path.string()).columns)
    if (column.name == name) return aux ? column.aux_offset : column.data_offset;
  FAIL("no column " << name);
  return 0;
}

void put_u64(const std::filesystem::path& path, std::uint64_t at, std::uint64_t value) {
  auto bytes = test::read_bytes(path.string());
  std::memcpy(bytes.data() + at, &value, 8);
  test::write_bytes(path.string(), bytes);
}

}  // namespace

TEST_CASE("open describes rows of any shape and sequence columns; the shards are version 1.2") {
  TempDir dir;
  test::write_dataset(dir.path(), shape_columns(16), {5, 7, 4});
  const auto shard0 = test::read_bytes((dir / "shard-00000.gcs").string());
  const auto header = shard::decode_header(shard0, "shard-00000.gcs");
  CHECK(header.version_minor == 2);
  CHECK(header.has_row_shapes());

  const Dataset dataset = Dataset::open(dir.path().string());
  REQUIRE(dataset.columns().size() == 7);
  const Column& image = dataset.columns()[0];
  CHECK(image.row_shape == std::vector<std::uint64_t>{3, 4, 5});
  CHECK(image.rank() == 4);
  CHECK(image.dim() == 5);
  CHECK(image.padded_dim == 5);
  CHECK(image.row_pitch_bytes() == 60);
  const Column& dense = dataset.columns()[1];
  CHECK(dense.row_shape == std::vector<std::uint64_t>{7});
  CHECK(dense.row_pitch_bytes() == 28);  // not a multiple of 16: format 1.2
  CHECK(dataset.columns()[2].row_shape.empty());
  CHECK(dataset.columns()[2].row_pitch_bytes() == 8);
  CHECK(dataset.columns()[3].padded_dim == 16);
  const Column& tokens = dataset.columns()[4];
  CHECK(tokens.kind == ColumnKind::sequence);
  CHECK(tokens.dtype == DType::i32);
  CHECK(tokens.rank() == 2);
  CHECK(tokens.row_pitch_bytes() == 0);
  CHECK(dataset.columns()[5].dtype == DType::i64);
}

TEST_CASE("host views of every tensor and sequence column hold what was written") {
  TempDir dir;
  const auto columns = shape_columns(16);
  test::write_dataset(dir.path(), columns, {5, 7, 4});
  const Dataset dataset = Dataset::open(dir.path().string());
  for (const bool verify : {true, false}) {
    CAPTURE(verify);
    const HostData whole = dataset.to_host({.verify = verify});
    REQUIRE(whole.pieces("image").size() == 3);
    check_host_tensors(whole, columns, 0, false);  // 5, 7, 4 rows end no page
    check_host_sequences(whole, columns, 0);
    // Rows starting and ending inside shards: the pieces' offsets do not start at 0.
    const HostData middle = dataset.select_rows(3, 14).to_host({.verify = verify});
    check_host_tensors(middle, columns, 3, false);
    check_host_sequences(middle, columns, 3);
    CHECK(u64_at(middle.pieces("tokens")[0].data) != 0);
    // A selection of only empty rows (tokens of rows 5 and 10 are empty).
    const HostData single = dataset.select_rows(5, 6).to_host({.verify = verify});
    CHECK(single.row_values("tokens", 0).empty());
    CHECK(single.row_values("ids", 0).size() == test::id_count(5) * 8);
  }
  const HostData data = dataset.to_host();
  CHECK(error_of([&] { data.row_values("image", 0); }).find("is a tensor column") !=
        std::string::npos);
  CHECK(error_of([&] { data.row_values("tokens", 16); }).find("outside the 16 selected rows") !=
        std::string::npos);
  CHECK(error_of([&] { data.text("tokens", 0); }).find("not a text column") != std::string::npos);
  CHECK(data.text("caption", 4) == "row 4 ✓");
}

TEST_CASE("tensor columns of any pitch across shards cut on pages are one zero-copy array") {
  // Pitches 60, 28, 8 and 64 bytes: 1024 rows are whole pages in every column.
  TempDir dir;
  constexpr std::uint64_t rows = 2348;
  const auto columns = shape_columns(rows);
  test::write_dataset(dir.path(), columns, {1024, 1024, 300});
  const Dataset dataset = Dataset::open(dir.path().string());
  const HostData whole = dataset.to_host();
  check_host_tensors(whole, columns, 0, true);
  check_host_sequences(whole, columns, 0);
  const HostData middle = dataset.select_rows(10, 2100).to_host({.verify = false});
  check_host_tensors(middle, columns, 10, true);
  check_host_sequences(middle, columns, 10);
  // 1536 rows are whole pages of the 8- and 64-byte rows only: the others stay pieces.
  TempDir uneven;
  test::write_dataset(uneven.path(), columns, {1536, 812});
  const HostData pieces = Dataset::open(uneven.path().string()).to_host();
  CHECK(pieces.joined("image") == nullptr);
  CHECK(pieces.joined("dense") == nullptr);
  CHECK(pieces.joined("label") != nullptr);
  CHECK(pieces.joined("emb") != nullptr);
  check_host_tensors(pieces, columns, 0, std::nullopt);
  check_host_sequences(pieces, columns, 0);
}

TEST_CASE("device loads place every tensor column and sequence column in one allocation") {
  REQUIRE(fake_selected);
  TempDir dir;
  constexpr std::uint64_t rows = 3000;
  const auto columns = shape_columns(rows);
  test::write_dataset(dir.path(), columns, {1100, 1000, 900},
                      {.chunk_size = 4096 * 2, .compressed_flag = false});
  const Dataset dataset = Dataset::open(dir.path().string());
  struct Case {
    ReadMode mode;
    Placement placement;
    bool verify;
  };
  for (const Case& c : {Case{ReadMode::automatic, Placement::device, true},
                        Case{ReadMode::pread, Placement::device, true},
                        Case{ReadMode::pread, Placement::device, false},
                        Case{ReadMode::automatic, Placement::host_pinned, true}}) {
    CAPTURE(static_cast<int>(c.mode));
    CAPTURE(static_cast<int>(c.placement));
    CAPTURE(c.verify);
    fake_cuda_reset();
    DeviceOptions options;
    options.read_mode = c.mode;
    options.placement = c.placement;
    options.verify = c.verify;
    options.threads = 3;
    options.staging_bytes = 64 << 10;
    {
      const DeviceData device = dataset.to_device(0, options);
      CHECK(device.rows() == rows);
      // Tensor and sequence columns are uploaded; text stays on the host.
      REQUIRE(device.columns().size() == 6);
      CHECK(error_of([&] { device.column("caption"); }).find("not among the uploaded") !=
            std::string::npos);
      check_device(device, columns, 0);
      // Sequence offsets lead the allocation, then each column's data in selection order.
      CHECK(device.column("tokens").offsets_offset == 0);
      CHECK(device.column("ids").offsets_offset == 4096 * 6);  // 3001 × 8 bytes take 6 pages
      CHECK(device.column("image").offset >= 4096 * 12);
      const bool verified = device.stats().bytes_verified > 0;
      CHECK(verified == c.verify);
      if (c.placement == Placement::device) CHECK(fake_cuda_stats().mallocs == 1);
      // A rank's slice starts and ends inside shards.
      const DeviceData slice = dataset.for_rank(1, 3).to_device(0, options);
      check_device(slice, columns, 1000);
    }
    check_nothing_left();
  }
  // Only sequence columns, only empty rows: offsets of zeros and no values.
  fake_cuda_reset();
  {
    const DeviceData empty = dataset.select_columns({"tokens"}).select_rows(5, 6).to_device(0);
    CHECK(empty.column("tokens").values == 0);
    CHECK(empty.column("tokens").offsets[1] == 0);
    CHECK(empty.bytes() == 4096);
    const DeviceData none = dataset.select_columns({"ids", "image"}).for_rank(0, 4000).to_device(0);
    CHECK(none.rows() == 0);
    CHECK(none.column("ids").offsets[0] == 0);
    CHECK(none.column("image").bytes == 0);
  }
  check_nothing_left();
}

TEST_CASE("corrupt sequence offsets are refused, with or without verification") {
  TempDir dir;
  const auto columns = shape_columns(16);
  test::write_dataset(dir.path(), columns, {5, 7, 4});
  const auto shard1 = dir / "shard-00001.gcs";
  const std::uint64_t tokens = column_entry_offset(shard1, "tokens");
  // Row 3 of shard 1 (dataset row 8) starts past the shard's values.
  put_u64(shard1, tokens + 3 * 8, 1ull << 40);
  const Dataset dataset = Dataset::open(dir.path().string());
  const std::string expected = shard1.string() + ": column 'tokens' row 3, bytes " +
                               std::to_string(tokens + 24) + "-" + std::to_string(tokens + 31) +
                               ": sequence offsets are not monotonic or do not end at the";
  CHECK(error_of([&] { dataset.to_host({.verify = false}); }).find(expected) != std::string::npos);
  fake_cuda_reset();
  DeviceOptions unverified;
  unverified.verify = false;
  CHECK(error_of([&] { dataset.to_device(0, unverified); }).find(expected) != std::string::npos);
  check_nothing_left();
  // Verification hashes the offsets before reading them: the chunk mismatch is reported.
  CHECK(error_of([&] { dataset.to_host(); }).find("chunk hash mismatch") != std::string::npos);
  CHECK(error_of([&] { dataset.to_device(0); }).find("chunk hash mismatch") != std::string::npos);
  check_nothing_left();
  // Loads that do not read those offsets are fine.
  CHECK(dataset.select_columns({"image", "ids"}).to_host({.verify = false}).rows() == 16);
  CHECK(dataset.select_rows(0, 5).to_host({.verify = false}).rows() == 5);

  // Offsets that decrease; and a whole shard whose last offset stops short of its values.
  test::write_dataset(dir.path(), columns, {5, 7, 4});
  const std::uint64_t ids = column_entry_offset(shard1, "ids");
  put_u64(shard1, ids + 2 * 8, 0);  // row 1 (dataset row 6) has 4 values: offset 2 drops to 0
  CHECK(error_of([&] {
          Dataset::open(dir.path().string()).to_host({.verify = false});
        }).find("column 'ids' row 2") != std::string::npos);
  test::write_dataset(dir.path(), columns, {5, 7, 4});
  const std::uint64_t last = u64_at(test::read_bytes(shard1.string()).data() + ids + 7 * 8);
  put_u64(shard1, ids + 7 * 8, last - 1);
  const Dataset short_end = Dataset::open(dir.path().string());
  CHECK(error_of([&] { short_end.to_host({.verify = false}); }).find("column 'ids' row 7") !=
        std::string::npos);
  // A selection inside the shard reads only offsets that are within the rule.
  CHECK(short_end.select_rows(5, 9).to_host({.verify = false}).rows() == 4);
}

TEST_CASE("corrupt sequence values fail a verified device load with their chunk") {
  TempDir dir;
  const auto columns = shape_columns(16);
  test::write_dataset(dir.path(), columns, {5, 7, 4});
  const auto shard2 = dir / "shard-00002.gcs";
  const std::uint64_t values = column_entry_offset(shard2, "ids", true);
  auto bytes = test::read_bytes(shard2.string());
  bytes[values + 3] ^= std::byte{0x10};
  test::write_bytes(shard2.string(), bytes);
  const Dataset dataset = Dataset::open(dir.path().string());
  fake_cuda_reset();
  CHECK(error_of([&] { dataset.to_device(0); }).find("chunk hash mismatch") != std::string::npos);
  CHECK(error_of([&] { dataset.to_host(); }).find("chunk hash mismatch") != std::string::npos);
  check_nothing_left();
  DeviceOptions unverified;
  unverified.verify = false;
  const DeviceData device = dataset.to_device(0, unverified);
  std::int64_t first = 0;
  std::memcpy(&first,
              static_cast<const std::byte*>(device.column("ids").data) +
                  device.column("ids").offsets[12] * 8,
              8);
  CHECK(first != test::id_value(12, 0));  // the flipped bit is visible without verification
}
