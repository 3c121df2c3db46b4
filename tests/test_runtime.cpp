// The runtime reader on the host: values, alignment, lifetime, selections, rank slicing,
// verification and the checks that refuse inconsistent shard sets.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "gpucache/common/hash.hpp"
#include "gpucache/runtime.hpp"
#include "runtime_test_shards.hpp"

using namespace gpucache;
using namespace gpucache::runtime;
using gpucache::test::TempDir;

namespace {

constexpr std::uint64_t kRows = 16;
const std::vector<std::uint64_t> kShardRows{5, 7, 4};

std::vector<test::TestColumn> standard_columns(std::uint64_t rows = kRows, std::uint64_t dim = 3) {
  return {test::f32_column("emb", rows, dim), test::i64_column("label", rows),
          test::text_column("caption", rows)};
}

// Reads the rows of a host tensor column back as (dataset row → logical values).
std::vector<std::vector<float>> read_f32(const HostData& data, const std::string& name) {
  const Column& column = data.column(name);
  std::vector<std::vector<float>> rows;
  for (const HostPiece& piece : data.pieces(name))
    for (std::uint64_t r = 0; r < piece.rows; ++r) {
      std::vector<float> row(column.dim());
      std::memcpy(row.data(), piece.data + r * column.row_pitch_bytes(), column.dim() * 4);
      rows.push_back(row);
    }
  return rows;
}

bool mapping_listed(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(path) != std::string::npos) return true;
  return false;
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const gpucache::Error& error) {
    return error.what();
  }
  return "(no error)";
}

void flip_byte(const std::filesystem::path& path, std::uint64_t offset) {
  auto bytes = test::read_bytes(path.string());
  bytes.at(offset) ^= std::byte{0x40};
  test::write_bytes(path.string(), bytes);
}

std::uint64_t column_offset(const std::filesystem::path& shard_path, const std::string& name) {
  const auto bytes = test::read_bytes(shard_path.string());
  for (const auto& column : shard::decode_layout(bytes, shard_path.string()).columns)
    if (column.name == name) return column.data_offset;
  FAIL("no column " << name);
  return 0;
}

}  // namespace

TEST_CASE("open lists columns, rows and shards in index order") {
  TempDir dir;
  test::write_dataset(dir.path(), standard_columns(), kShardRows);
  const Dataset dataset = Dataset::open(dir.path().string());
  CHECK(dataset.total_rows() == kRows);
  CHECK(dataset.rows() == kRows);
  REQUIRE(dataset.shards().size() == 3);
  CHECK(dataset.shards()[1].first_row == 5);
  CHECK(dataset.shards()[2].rows == 4);
  REQUIRE(dataset.columns().size() == 3);
  const Column& emb = dataset.columns()[0];
  CHECK(emb.name == "emb");
  CHECK(emb.kind == ColumnKind::tensor);
  CHECK(emb.dtype == DType::f32);
  CHECK(emb.dim() == 3);
  CHECK(emb.padded_dim == 16);
  CHECK(emb.row_pitch_bytes() == 64);
  CHECK(dataset.columns()[1].rank() == 1);
  CHECK(dataset.columns()[2].kind == ColumnKind::text);
  CHECK(dtype_name(emb.dtype) == "f32");
}

TEST_CASE("to_host returns zero-copy, 4096-aligned views whose values equal the inputs") {
  TempDir dir;
  const auto columns = standard_columns();
  test::write_dataset(dir.path(), columns, kShardRows);
  const HostData data = Dataset::open(dir.path().string()).to_host();
  CHECK(data.rows() == kRows);

  const auto ranges = data.mapped_ranges();
  REQUIRE(ranges.size() == 3);
  const Column& emb = data.column("emb");
  for (const std::string name : {"emb", "label", "caption"}) {
    const auto pieces = data.pieces(name);
    REQUIRE(pieces.size() == 3);
    for (std::size_t s = 0; s < 3; ++s) {
      // Each piece is inside its shard's mapping at a 4096-aligned file offset.
      const auto& range = ranges[s];
      CHECK(pieces[s].data >= range.data);
      CHECK(pieces[s].data < range.data + range.size);
      CHECK((pieces[s].data - range.data) % 4096 == 0);
      CHECK(reinterpret_cast<std::uintptr_t>(pieces[s].data) % 4096 == 0);
      CHECK(pieces[s].shard_index == s);
    }
  }
  const auto rows = read_f32(data, "emb");
  REQUIRE(rows.size() == kRows);
  for (std::uint64_t r = 0; r < kRows; ++r)
    for (std::uint64_t j = 0; j < 3; ++j) CHECK(rows[r][j] == test::test_value(r, j));
  // Row padding is zero.
  for (const HostPiece& piece : data.pieces("emb"))
    for (std::uint64_t r = 0; r < piece.rows; ++r)
      for (std::uint64_t b = emb.dim() * 4; b < emb.row_pitch_bytes(); ++b)
        CHECK(piece.data[r * emb.row_pitch_bytes() + b] == std::byte{0});
  std::uint64_t row = 0;
  for (const HostPiece& piece : data.pieces("label"))
    for (std::uint64_t r = 0; r < piece.rows; ++r, ++row) {
      std::int64_t value;
      std::memcpy(&value, piece.data + r * 8, 8);
      CHECK(value == static_cast<std::int64_t>(row) * 7 - 3);
    }
  for (std::uint64_t r = 0; r < kRows; ++r) CHECK(data.text("caption", r) == columns[2].texts[r]);
  CHECK(error_of([&] { data.text("caption", kRows); }).find("outside the 16 selected rows") !=
        std::string::npos);
  CHECK(error_of([&] { data.text("emb", 0); }).find("not a text column") != std::string::npos);
}

TEST_CASE("views keep the mapping alive; it goes when the last owner does") {
  TempDir dir;
  test::write_dataset(dir.path(), standard_columns(), kShardRows);
  const std::string shard0 = (dir / "shard-00000.gcs").string();
  std::shared_ptr<const void> token;
  const std::byte* data = nullptr;
  {
    HostData host;
    {
      const Dataset dataset = Dataset::open(dir.path().string());
      CHECK_FALSE(mapping_listed(shard0));  // open reads the tables and lets go of the file
      host = dataset.to_host();
    }
    CHECK(mapping_listed(shard0));
    data = host.pieces("emb")[0].data;
    token = host.owner();
  }
  CHECK(mapping_listed(shard0));
  float first;
  std::memcpy(&first, data + 4, 4);
  CHECK(first == test::test_value(0, 1));
  token.reset();
  CHECK_FALSE(mapping_listed(shard0));
}

TEST_CASE("select_columns and select_rows narrow the load") {
  TempDir dir;
  test::write_dataset(dir.path(), standard_columns(), kShardRows);
  const Dataset dataset = Dataset::open(dir.path().string());
  const Dataset narrowed = dataset.select_columns({"label", "emb"}).select_rows(4, 13);
  REQUIRE(narrowed.columns().size() == 2);
  CHECK(narrowed.columns()[0].name == "label");
  CHECK(narrowed.row_begin() == 4);
  CHECK(narrowed.rows() == 9);
  CHECK(narrowed.needed_shards() == std::vector<std::size_t>{0, 1, 2});
  const HostData data = narrowed.to_host();
  const auto rows = read_f32(data, "emb");
  REQUIRE(rows.size() == 9);
  for (std::uint64_t r = 0; r < 9; ++r) CHECK(rows[r][0] == test::test_value(4 + r, 0));
  CHECK(data.pieces("emb")[1].first_row == 1);
  CHECK(error_of([&] { data.pieces("caption"); }).find("not in this selection") !=
        std::string::npos);
  // A selection of a selection is relative to it.
  CHECK(narrowed.select_rows(1, 2).row_begin() == 5);
  CHECK(narrowed.select_rows(1, 2).needed_shards() == std::vector<std::size_t>{1});

  CHECK(error_of([&] {
          dataset.select_columns({"nope"});
        }).find("column 'nope': no such column; the dataset has emb, label, caption") !=
        std::string::npos);
  CHECK(error_of([&] {
          dataset.select_columns({"emb", "emb"});
        }).find("selected twice") != std::string::npos);
  CHECK(error_of([&] { dataset.select_rows(3, 17); }).find("outside the selection") !=
        std::string::npos);
}

TEST_CASE("rank slicing gives equal contiguous slices covering every kept row once") {
  TempDir dir;
  test::write_dataset(dir.path(), standard_columns(), kShardRows);
  const Dataset dataset = Dataset::open(dir.path().string());
  for (std::uint32_t world = 1; world <= 6; ++world) {
    CAPTURE(world);
    const std::uint64_t per_rank = kRows / world;
    std::multiset<float> seen;
    for (std::uint32_t rank = 0; rank < world; ++rank) {
      const Dataset slice = dataset.for_rank(rank, world);
      CHECK(slice.rows() == per_rank);
      CHECK(slice.row_begin() == rank * per_rank);
      const HostData data = slice.to_host();
      // Only the shards holding the slice's rows are mapped.
      std::set<std::string> mapped;
      for (const auto& range : data.mapped_ranges()) mapped.insert(range.path);
      std::set<std::string> needed;
      for (const std::size_t k : slice.needed_shards()) needed.insert(dataset.shards()[k].path);
      CHECK(mapped == needed);
      for (const auto& row : read_f32(data, "emb")) seen.insert(row[0]);
    }
    // Rows 0 .. world × per_rank - 1 exactly once each; the remainder is dropped.
    std::multiset<float> expected;
    for (std::uint64_t r = 0; r < world * per_rank; ++r) expected.insert(test::test_value(r, 0));
    CHECK(seen == expected);
  }
  CHECK(dataset.for_rank(0, 4).needed_shards() == std::vector<std::size_t>{0});
  CHECK(dataset.for_rank(3, 4).needed_shards() == std::vector<std::size_t>{2});
  CHECK(dataset.for_rank(0, 17).rows() == 0);
  CHECK(dataset.for_rank(0, 17).to_host().rows() == 0);
  CHECK(error_of([&] { dataset.for_rank(2, 2); }).find("must be below world_size 2") !=
        std::string::npos);
  CHECK(error_of([&] { dataset.for_rank(0, 0); }).find("world_size") != std::string::npos);
}

TEST_CASE("rank shares keep every row: the first rows % world ranks get one more") {
  TempDir dir;
  test::write_dataset(dir.path(), standard_columns(), kShardRows);
  const Dataset dataset = Dataset::open(dir.path().string());
  for (std::uint32_t world = 1; world <= 6; ++world) {
    CAPTURE(world);
    std::uint64_t next = 0;
    for (std::uint32_t rank = 0; rank < world; ++rank) {
      const Dataset share = dataset.share_for_rank(rank, world);
      CHECK(share.rows() == kRows / world + (rank < kRows % world ? 1 : 0));
      CHECK(share.row_begin() == next);  // contiguous, in rank order
      next += share.rows();
    }
    CHECK(next == kRows);
  }
  CHECK(dataset.share_for_rank(16, 17).rows() == (kRows > 16 ? 1u : 0u));
  CHECK(error_of([&] { dataset.share_for_rank(2, 2); }).find("must be below world_size 2") !=
        std::string::npos);
}

TEST_CASE("host loads report what they hashed; the device bound needs no mapping") {
  TempDir dir;
  test::write_dataset(dir.path(), standard_columns(), kShardRows);
  const Dataset dataset = Dataset::open(dir.path().string());
  const HostData verified = dataset.to_host();
  CHECK(verified.stats().bytes_copied == 0);
  CHECK(verified.stats().bytes_verified > 0);
  CHECK(verified.stats().seconds >= 0);
  HostOptions unverified;
  unverified.verify = false;
  CHECK(dataset.to_host(unverified).stats().bytes_verified == 0);
  // Tensor columns exactly: rows × row pitch, each rounded up to 4096 bytes.
  const Dataset tensors = dataset.select_columns({"emb"});
  const std::uint64_t pitch = tensors.columns()[0].row_pitch_bytes();
  CHECK(tensors.device_bytes_bound() == (kRows * pitch + 4095) / 4096 * 4096);
  CHECK(dataset.select_rows(0, 0).select_columns({"emb"}).device_bytes_bound() == 0);
}

TEST_CASE("a corrupted chunk fails the load with the shard, chunk and byte range") {
  TempDir dir;
  const std::uint64_t rows = 150;
  test::write_dataset(dir.path(), standard_columns(rows, 40), {100, 50},
                      {.chunk_size = 4096, .compressed_flag = false});
  const auto shard1 = dir / "shard-00001.gcs";
  // Row 30 of shard 1's emb column: 192-byte rows, so byte 5760 of the column, in its chunk 1.
  const std::uint64_t emb = column_offset(shard1, "emb");
  flip_byte(shard1, emb + 30 * 192 + 8);
  const Dataset dataset = Dataset::open(dir.path().string());  // open checks only the tables

  const std::string message = error_of([&] { dataset.to_host(); });
  CHECK(message.find(shard1.string()) != std::string::npos);
  CHECK(message.find("chunk " + std::to_string((emb - 4096) / 4096 + 1) + ", bytes " +
                     std::to_string(emb + 4096) + "-" + std::to_string(emb + 8191)) !=
        std::string::npos);
  CHECK(message.find("column 'emb' rows 21-42") != std::string::npos);
  CHECK(message.find("chunk hash mismatch") != std::string::npos);

  // Loads that do not touch the broken chunk succeed: other shards, other columns, other rows.
  CHECK(dataset.for_rank(0, 2).to_host().rows() == 75);
  CHECK(dataset.select_columns({"label", "caption"}).to_host().rows() == rows);
  CHECK(dataset.select_rows(100, 120).to_host().rows() == 20);
  CHECK(error_of([&] {
          dataset.select_rows(100 + 30, 100 + 31).to_host();
        }).find("chunk hash mismatch") != std::string::npos);
  // verify=false skips the hashes: the flipped value is visible.
  const HostData unchecked = dataset.to_host({.verify = false, .threads = 1});
  CHECK(read_f32(unchecked, "emb")[130][2] != test::test_value(130, 2));
}

TEST_CASE("corrupt text offsets are refused even without verification") {
  TempDir dir;
  test::write_dataset(dir.path(), standard_columns(), kShardRows);
  const auto shard0 = dir / "shard-00000.gcs";
  const std::uint64_t offsets = column_offset(shard0, "caption");
  auto bytes = test::read_bytes(shard0.string());
  const std::uint64_t huge = 1ull << 40;
  std::memcpy(bytes.data() + offsets + 2 * 8, &huge, 8);
  test::write_bytes(shard0.string(), bytes);
  const Dataset dataset = Dataset::open(dir.path().string());
  // The shard module's offsets rule and message, as gpucache verify reports them.
  CHECK(error_of([&] { dataset.to_host({.verify = false}); })
            .find(shard0.string() + ": column 'caption' row 2, bytes " +
                  std::to_string(offsets + 16) + "-" + std::to_string(offsets + 23) +
                  ": text offsets are not monotonic or do not end at the") != std::string::npos);
  CHECK(error_of([&] { dataset.to_host(); }).find("chunk hash mismatch") != std::string::npos);
  CHECK(dataset.select_columns({"emb"}).to_host({.verify = false}).rows() == kRows);
}

// Opening reads only the manifest; each shard is checked against it when a load maps it, so
// these are refused at the first load that needs the damaged shard.
TEST_CASE("inconsistent or incomplete shard sets are refused") {
  TempDir dir;
  const auto columns = standard_columns();
  auto reset = [&] { test::write_dataset(dir.path(), columns, kShardRows); };
  auto open_error = [&] { return error_of([&] { Dataset::open(dir.path().string()).to_host(); }); };

  reset();
  std::filesystem::remove(dir / "shard-00001.gcs");
  CHECK(open_error().find("shard-00001.gcs: missing: listed in manifest.json but not on disk") !=
        std::string::npos);

  reset();
  std::filesystem::remove(dir / "shard-00002.gcs");
  std::filesystem::copy_file(dir / "shard-00001.gcs", dir / "shard-00002.gcs");
  CHECK(open_error().find("shard-00002.gcs: header: header hash") != std::string::npos);
  CHECK(open_error().find("(shard replaced or swapped?) according to manifest.json") !=
        std::string::npos);

  reset();
  // A file the manifest does not list is not part of the dataset (as during an append).
  std::filesystem::copy_file(dir / "shard-00001.gcs", dir / "shard-0001.gcs");
  std::filesystem::copy_file(dir / "shard-00001.gcs", dir / "shard-00003.gcs");
  CHECK(Dataset::open(dir.path().string()).to_host().rows() == kRows);

  reset();  // shard 1 claims to start at row 6: row 5 is missing
  test::write_bytes((dir / "shard-00001.gcs").string(), test::build_shard(1, 6, 7, columns));
  CHECK(open_error().find("shard-00001.gcs: header: header hash") != std::string::npos);

  reset();  // shard 2 has a different embedding width
  auto wider = columns;
  wider[0] = test::f32_column("emb", kRows, 20);
  test::write_bytes((dir / "shard-00002.gcs").string(), test::build_shard(2, 12, 4, wider));
  const std::string message = open_error();
  CHECK(message.find("shard-00002.gcs: header: header hash") != std::string::npos);

  reset();
  test::write_bytes((dir / "shard-00002.gcs").string(),
                    test::build_shard(2, 12, 4, {columns[0], columns[1]}));
  CHECK(open_error().find("shard-00002.gcs: header: header hash") != std::string::npos);

  reset();  // the last shard deleted: the rest is gap-free, but every header says 3 shards
  std::filesystem::remove(dir / "shard-00002.gcs");
  CHECK(open_error().find("shard-00002.gcs: missing: listed in manifest.json") !=
        std::string::npos);

  reset();  // the same shard of another pack with the same shape and rows
  {
    test::ShardOptions other;
    other.shard_count = 3;
    other.dataset_rows = kRows;
    other.dataset_id = 0xd1ff;
    test::write_bytes((dir / "shard-00001.gcs").string(),
                      test::build_shard(1, 5, 7, columns, other));
  }
  CHECK(open_error().find("shard-00001.gcs: header byte 152: belongs to another dataset") !=
        std::string::npos);

  reset();  // every header agrees on 3 shards but says the dataset has one row more
  for (std::uint32_t k = 0; k < 3; ++k) {
    test::ShardOptions longer;
    longer.shard_count = 3;
    longer.dataset_rows = kRows + 1;
    const std::uint64_t firsts[] = {0, 5, 12};
    test::write_bytes((dir / test::shard_name(k)).string(),
                      test::build_shard(k, firsts[k], kShardRows[k], columns, longer));
  }
  CHECK(open_error().find("header hash") != std::string::npos);

  reset();
  std::filesystem::remove(dir / "manifest.json");
  CHECK(open_error().find("manifest.json: missing: the dataset is unfinished") !=
        std::string::npos);

  reset();
  std::filesystem::resize_file(dir / "shard-00001.gcs",
                               std::filesystem::file_size(dir / "shard-00001.gcs") - 10);
  CHECK(open_error().find("(truncated)") != std::string::npos);

  std::filesystem::remove_all(dir.path());
  std::filesystem::create_directories(dir.path());
  CHECK(open_error().find("no shard-*.gcs files") != std::string::npos);
  CHECK(error_of([&] {
          Dataset::open((dir / "absent").string());
        }).find("no such dataset directory or shard file") != std::string::npos);
  test::write_bytes((dir / "junk.gcs").string(), std::vector<std::byte>(400, std::byte{7}));
  CHECK(error_of([&] { Dataset::open((dir / "junk.gcs").string()); }).find("bad magic") !=
        std::string::npos);
}

TEST_CASE("shards of format 1.0, which carry no dataset fields, still open") {
  TempDir dir;
  const auto columns = standard_columns();
  test::write_dataset(dir.path(), columns, kShardRows);
  // Rewrite each header as a 1.0 writer did: minor version 0, bytes 136-247 zero, new hash.
  for (std::uint32_t k = 0; k < 3; ++k) {
    const std::string path = (dir / test::shard_name(k)).string();
    auto bytes = test::read_bytes(path);
    auto header = shard::decode_header(bytes, path);
    header.version_minor = 0;
    const auto encoded = shard::encode_header(header);
    std::memcpy(bytes.data(), encoded.data(), encoded.size());
    std::memcpy(bytes.data() + bytes.size() - 16, encoded.data() + 248, 8);  // footer copy
    const auto footer_hash = gpucache::detail::xxh3_64(std::span(bytes).last(32).first(24));
    std::memcpy(bytes.data() + bytes.size() - 8, &footer_hash, 8);
    test::write_bytes(path, bytes);
  }
  test::write_manifest(dir.path());
  const Dataset dataset = Dataset::open(dir.path().string());
  CHECK(dataset.total_rows() == kRows);
  CHECK(read_f32(dataset.to_host(), "emb")[13][2] == test::test_value(13, 2));
}

TEST_CASE("a single shard opens as a dataset of its own, numbered from row 0") {
  TempDir dir;
  const auto columns = standard_columns();
  test::write_dataset(dir.path(), columns, kShardRows);
  const Dataset dataset = Dataset::open((dir / "shard-00001.gcs").string());
  CHECK(dataset.total_rows() == 7);
  CHECK(dataset.shards()[0].first_row == 5);
  const HostData data = dataset.select_rows(2, 4).to_host();
  CHECK(read_f32(data, "emb")[0][1] == test::test_value(7, 1));
  CHECK(data.text("caption", 1) == columns[2].texts[8]);
}

TEST_CASE("a shard replaced after open is noticed at load") {
  TempDir dir;
  auto columns = standard_columns();
  test::write_dataset(dir.path(), columns, kShardRows);
  const Dataset dataset = Dataset::open(dir.path().string());
  columns[0] = test::f32_column("emb", kRows, 3);
  std::memset(columns[0].values.data(), 0x7f, 4);
  test::write_bytes((dir / "shard-00000.gcs").string(), test::build_shard(0, 0, 5, columns));
  CHECK(error_of([&] { dataset.to_host(); }).find("shard replaced or swapped?") !=
        std::string::npos);
}

TEST_CASE("host views are copy-on-write: writing to one changes neither the file nor other loads") {
  TempDir dir;
  test::write_dataset(dir.path(), standard_columns(), kShardRows);
  const Dataset dataset = Dataset::open(dir.path().string());
  const auto before = test::read_bytes((dir / "shard-00000.gcs").string());
  const HostData first = dataset.to_host();
  // What PyTorch does with a tensor it cannot mark read-only.
  auto* writable = const_cast<std::byte*>(first.pieces("emb")[0].data);
  writable[0] = std::byte{0x55};
  CHECK(first.pieces("emb")[0].data[0] == std::byte{0x55});
  CHECK(dataset.to_host().pieces("emb")[0].data[0] == std::byte{0});
  CHECK(test::read_bytes((dir / "shard-00000.gcs").string()) == before);
}

TEST_CASE("a tensor column across shards cut on page boundaries is one zero-copy array") {
  TempDir dir;
  // emb: 64-byte rows (64 per page); label: 8-byte rows (512 per page). 512-row shards meet on
  // pages in both columns; the caption column never joins (its offsets are per shard).
  constexpr std::uint64_t rows = 1124;
  const auto columns = standard_columns(rows);
  test::write_dataset(dir.path(), columns, {512, 512, 100});
  const Dataset dataset = Dataset::open(dir.path().string());

  auto check_rows = [&](const HostData& data, std::uint64_t first_row) {
    const Column& emb = data.column("emb");
    const std::byte* joined = data.joined("emb");
    REQUIRE(joined != nullptr);
    for (std::uint64_t r = 0; r < data.rows(); ++r)
      for (std::uint64_t j = 0; j < emb.padded_dim; ++j) {
        float value = 0;
        std::memcpy(&value, joined + r * emb.row_pitch_bytes() + j * 4, 4);
        CHECK(value == (j < emb.dim() ? test::test_value(first_row + r, j) : 0.0f));
      }
    const std::byte* labels = data.joined("label");
    REQUIRE(labels != nullptr);
    for (std::uint64_t r = 0; r < data.rows(); ++r) {
      std::int64_t label = 0;
      std::memcpy(&label, labels + r * 8, 8);
      CHECK(label == static_cast<std::int64_t>(first_row + r) * 7 - 3);
    }
    CHECK(data.joined("caption") == nullptr);
  };

  const HostData whole = dataset.to_host();
  REQUIRE(whole.pieces("emb").size() == 3);
  check_rows(whole, 0);
  // The joined view is a mapping of its own, listed among the mapped ranges.
  bool listed = false;
  for (const MappedRange& range : whole.mapped_ranges())
    listed = listed || (range.data == whole.joined("emb") &&
                        range.size == rows * whole.column("emb").row_pitch_bytes());
  CHECK(listed);

  // A selection starting inside a page and ending inside the last shard.
  const HostData middle = dataset.select_rows(10, 1100).to_host({.verify = false});
  REQUIRE(middle.pieces("emb").size() == 3);
  check_rows(middle, 10);

  // Copy-on-write like the pieces: a write stays in this view.
  const auto before = test::read_bytes((dir / "shard-00001.gcs").string());
  auto* writable = const_cast<std::byte*>(whole.joined("emb"));
  writable[600 * 64] = std::byte{0x55};
  CHECK(test::read_bytes((dir / "shard-00001.gcs").string()) == before);
  CHECK(dataset.to_host().joined("emb")[600 * 64] != std::byte{0x55});

  // One shard: the shard's own view.
  const HostData first = dataset.select_rows(3, 9).to_host();
  CHECK(first.joined("emb") == first.pieces("emb")[0].data);
}

TEST_CASE("shards that do not meet on page boundaries are left as pieces") {
  TempDir dir;
  test::write_dataset(dir.path(), standard_columns(), kShardRows);  // 5, 7, 4 rows
  const HostData data = Dataset::open(dir.path().string()).to_host();
  CHECK(data.pieces("emb").size() == 3);
  CHECK(data.joined("emb") == nullptr);
  CHECK(data.joined("label") == nullptr);
  CHECK(read_f32(data, "emb")[6][1] == test::test_value(6, 1));
}
