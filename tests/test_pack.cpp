#include <doctest/doctest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "gpucache/error.hpp"
#include "gpucache/inspect.hpp"
#include "gpucache/npy.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard_io/shard_reader.hpp"
#include "gpucache/verify.hpp"
#include "pack_test_support.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

namespace {

std::vector<float> random_rows(std::uint64_t rows, std::uint64_t dim, unsigned seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal;
  std::vector<float> values(rows * dim);
  for (auto& v : values) v = normal(random);
  return values;
}

void save_f32(const std::string& path, const std::vector<float>& values, std::uint64_t rows,
              std::uint64_t dim) {
  write_npy(path, DType::f32, {rows, dim},
            [&](std::span<std::byte> out, std::uint64_t first, std::uint64_t count) {
              std::memcpy(out.data(), values.data() + first * dim, count * dim * 4);
            });
}

std::vector<std::string> dataset_files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Packs `input` as `dtype` on one thread and on two, into `output` + "1" and "2"; each run must
// keep `kept` rows in one shard that verifies. Returns the two shards' paths.
std::array<std::string, 2> pack_on_one_and_two_threads(const std::string& input,
                                                       const std::string& output, const char* dtype,
                                                       std::uint64_t kept) {
  std::array<std::string, 2> shards;
  for (unsigned threads : {1u, 2u}) {
    PackOptions options;
    options.inputs = {input};
    options.output_dir = output + std::to_string(threads);
    options.dtype = parse_dtype(dtype);
    options.threads = threads;
    const auto result = pack(options);
    REQUIRE(result.shards.size() == 1);
    CHECK(result.rows == kept);
    CHECK(verify(options.output_dir).ok());
    shards[threads - 1] = options.output_dir + "/" + result.shards[0].file;
  }
  return shards;
}

}  // namespace

TEST_CASE("packing twice gives byte-identical datasets") {
  test_support::ScratchDir scratch;
  save_f32(scratch / "a.npy", random_rows(300, 33, 1), 300, 33);
  PackOptions options;
  options.inputs = {scratch / "a.npy"};
  options.dtype = DType::bf16;
  options.shard_rows = 128;
  options.output_dir = scratch / "one";
  pack(options);
  options.output_dir = scratch / "two";
  options.threads = 1;
  pack(options);
  const auto names = dataset_files(scratch / "one");
  REQUIRE(names == dataset_files(scratch / "two"));
  CHECK(names.size() == 4);  // 3 shards + manifest
  for (const auto& name : names)
    CHECK(test_support::read_bytes(scratch / ("one/" + name)) ==
          test_support::read_bytes(scratch / ("two/" + name)));
}

TEST_CASE(
    "several inputs are concatenated, with @source and @source_row recording each row's origin") {
  test_support::ScratchDir scratch;
  const auto a = random_rows(10, 8, 1), b = random_rows(6, 8, 2);
  save_f32(scratch / "a.npy", a, 10, 8);
  save_f32(scratch / "b.npy", b, 6, 8);
  PackOptions options;
  options.inputs = {scratch / "a.npy", scratch / "b.npy"};
  options.output_dir = scratch / "ds";
  options.shard_rows = 7;
  const auto result = pack(options);
  CHECK(result.rows == 16);
  CHECK(result.shards.size() == 3);
  std::vector<float> seen;
  std::vector<std::int32_t> sources;
  std::vector<std::int64_t> source_rows;
  for (const auto& shard : result.shards) {
    shard::ShardReader reader(scratch / ("ds/" + shard.file));
    const auto& column = reader.layout().columns[0];
    CHECK(column.name == "embedding");
    CHECK(column.padded_dim == 16);
    for (std::uint64_t r = 0; r < reader.rows(); ++r) {
      const float* row = reinterpret_cast<const float*>(reader.tensor_data(0).data() +
                                                        r * column.row_pitch_bytes());
      seen.insert(seen.end(), row, row + 8);
      sources.push_back(reinterpret_cast<const std::int32_t*>(reader.tensor_data(1).data())[r]);
      source_rows.push_back(reinterpret_cast<const std::int64_t*>(reader.tensor_data(2).data())[r]);
    }
  }
  std::vector<float> expected = a;
  expected.insert(expected.end(), b.begin(), b.end());
  CHECK(seen == expected);
  CHECK(sources == std::vector<std::int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1});
  CHECK(source_rows == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5});
}

TEST_CASE("shard size splits rows so each shard stays within the budget") {
  test_support::ScratchDir scratch;
  save_f32(scratch / "a.npy", random_rows(2000, 64, 3), 2000, 64);
  PackOptions options;
  options.inputs = {scratch / "a.npy"};
  options.output_dir = scratch / "ds";
  options.shard_size = 200 * 1024;
  const auto result = pack(options);
  CHECK(result.shards.size() > 1);
  std::uint64_t rows = 0;
  for (const auto& shard : result.shards) {
    CHECK(shard.bytes <= options.shard_size);
    rows += shard.rows;
  }
  CHECK(rows == 2000);
}

// Full shards hold a multiple of 1024 rows here (the i32 @source column needs 1024 rows per page),
// so every tensor column of a full shard ends on a page boundary and the runtime can map shard
// after shard into one contiguous view.
TEST_CASE("shards cut by size hold whole pages of every tensor column") {
  test_support::ScratchDir scratch;
  save_f32(scratch / "a.npy", random_rows(10000, 64, 5), 10000, 64);
  PackOptions options;
  options.inputs = {scratch / "a.npy"};
  options.output_dir = scratch / "ds";
  options.shard_size = 1 << 20;
  const auto result = pack(options);
  // 268-byte rows (256 of embedding, 12 of provenance): 3790 fit, cut to 3 x 1024.
  REQUIRE(result.shards.size() == 4);
  for (std::size_t s = 0; s + 1 < result.shards.size(); ++s) {
    CHECK(result.shards[s].rows == 3072);
    CHECK(result.shards[s].bytes <= options.shard_size);
  }
  CHECK(result.shards.back().rows == 10000 - 3 * 3072);
  CHECK(nlohmann::json::parse(inspect(scratch / "ds").json)["cpu_zero_copy"] == true);

  // Rows with text: cut at the last multiple of 1024 that fits, the rest opens the next shard.
  // (1.5: JSON arrays of integer literals only would read as i64 token ids, not embeddings.)
  {
    std::ofstream jsonl(scratch / "cache.jsonl");
    for (int r = 0; r < 6000; ++r)
      jsonl << "{\"text\": \"" << std::string(static_cast<std::size_t>(r % 50), 'x')
            << "\", \"embedding\": [1.5, 2, " << r % 7 + 1 << "]}\n";
  }
  options.inputs = {scratch / "cache.jsonl"};
  options.output_dir = scratch / "text";
  options.shard_size = 400 * 1024;
  const auto text_result = pack(options);
  REQUIRE(text_result.shards.size() >= 2);
  std::uint64_t rows = 0;
  for (std::size_t s = 0; s < text_result.shards.size(); ++s) {
    CAPTURE(s);
    if (s + 1 < text_result.shards.size()) CHECK(text_result.shards[s].rows % 1024 == 0);
    CHECK(text_result.shards[s].bytes <= options.shard_size);
    rows += text_result.shards[s].rows;
  }
  CHECK(rows == 6000);

  // --shard-rows is taken as given.
  options.inputs = {scratch / "a.npy"};
  options.output_dir = scratch / "exact";
  options.shard_rows = 3000;
  options.shard_size = 1ull << 30;
  const auto exact = pack(options);
  CHECK(exact.shards[0].rows == 3000);
}

// The same rows as a big-endian .npy, which pack cannot read in place (staged path).
void save_f32_big_endian(const std::string& path, const std::vector<float>& values,
                         std::uint64_t rows, std::uint64_t dim) {
  std::string header = "{'descr': '>f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(dim) + "), }";
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::vector<char> bytes{'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  bytes.push_back(static_cast<char>(header.size() & 0xff));
  bytes.push_back(static_cast<char>(header.size() >> 8));
  bytes.insert(bytes.end(), header.begin(), header.end());
  for (const float value : values) {
    const auto bits = __builtin_bswap32(std::bit_cast<std::uint32_t>(value));
    const auto* raw = reinterpret_cast<const char*>(&bits);
    bytes.insert(bytes.end(), raw, raw + 4);
  }
  test_support::write_bytes(path, bytes);
}

// f32 rows stored contiguously in the input are validated and converted where they lie; others
// go through a staging copy. Both must give the same bytes, with rows dropped in between.
TEST_CASE("rows converted in place and through staging pack to the same shard bytes") {
  // dim 48 needs no padding: f32 rows are then stored straight from the input.
  for (const std::uint64_t dim : {std::uint64_t{37}, std::uint64_t{48}}) {
    CAPTURE(dim);
    test_support::ScratchDir scratch;
    const std::uint64_t rows = 5000;
    auto values = random_rows(rows, dim, 21);
    for (std::uint64_t r = 0; r < rows; r += 97) values[r * dim + 3] = NAN;  // dropped
    for (std::uint64_t r = 5; r < rows; r += 131) values[r * dim] = 1e-6f;   // subnormal in f16
    save_f32(scratch / "le.npy", values, rows, dim);
    save_f32_big_endian(scratch / "be.npy", values, rows, dim);
    for (const char* dtype : {"f16", "bf16", "f32"}) {
      CAPTURE(dtype);
      std::vector<std::vector<std::byte>> columns;
      for (const char* input : {"le.npy", "be.npy"}) {
        PackOptions options;
        options.inputs = {scratch / input};
        options.output_dir = scratch / (std::string(input) + dtype);
        options.dtype = parse_dtype(dtype);
        options.shard_rows = 2048;  // several shards, blocks cut inside runs
        const auto result = pack(options);
        CHECK(result.rows == rows - (rows + 96) / 97);
        std::vector<std::byte> column;
        for (const auto& shard : result.shards) {
          const shard::ShardReader reader(options.output_dir + "/" + shard.file);
          const auto data = reader.tensor_data(0);
          column.insert(column.end(), data.begin(), data.end());
        }
        columns.push_back(std::move(column));
      }
      CHECK(columns[0] == columns[1]);
    }
  }
}

TEST_CASE("rows stored on two threads (copied file to file, or converted) match one thread") {
  // Over 3 chunks of 4 MiB per shard, so whole chunks are hashed as they are stored (not read
  // back by the writer), with dropped rows cutting the input into many runs.
  test_support::ScratchDir scratch;
  const std::uint64_t rows = 7000, dim = 512;
  auto values = random_rows(rows, dim, 5);
  for (std::uint64_t r = 3; r < rows; r += 1001) values[r * dim] = NAN;
  save_f32(scratch / "in.npy", values, rows, dim);
  for (const char* dtype : {"f32", "f16"}) {
    CAPTURE(dtype);
    const auto shards =
        pack_on_one_and_two_threads(scratch / "in.npy", scratch / dtype, dtype, rows - 7);
    CHECK(test_support::read_bytes(shards[0]) == test_support::read_bytes(shards[1]));
  }
}

TEST_CASE("rows lying apart (a tensor each) are written from where they lie, as one thread would") {
  // A dialogue JSONL file gives every row's vectors a tensor of their own: f32 rows are written
  // from there (vectored writes) while another thread hashes them; f16 rows are gathered and
  // converted. Over 2 chunks of 4 MiB, with dropped rows cutting the rows into runs.
  test_support::ScratchDir scratch;
  const std::uint64_t rows = 2200, dim = 512;
  const auto questions = random_rows(rows, dim, 8), answers = random_rows(rows, dim, 9);
  {
    std::ofstream out(scratch / "dialogue.jsonl");
    for (std::uint64_t r = 0; r < rows; ++r) {
      nlohmann::json line;
      line["question"] = "question " + std::to_string(r);
      line["answer"] = "answer " + std::to_string(r);
      std::vector<float> q(questions.begin() + static_cast<std::ptrdiff_t>(r * dim),
                           questions.begin() + static_cast<std::ptrdiff_t>((r + 1) * dim));
      if (r % 301 == 5) std::fill(q.begin(), q.end(), 0.0f);  // dropped: norm below 0.1
      line["question_embedding"] = q;
      line["answer_embedding"] =
          std::vector<float>(answers.begin() + static_cast<std::ptrdiff_t>(r * dim),
                             answers.begin() + static_cast<std::ptrdiff_t>((r + 1) * dim));
      out << line.dump() << "\n";
    }
  }
  for (const char* dtype : {"f32", "f16"}) {
    CAPTURE(dtype);
    const auto shards = pack_on_one_and_two_threads(
        scratch / "dialogue.jsonl", scratch / (std::string("dialogue-") + dtype), dtype, rows - 8);
    CHECK(test_support::read_bytes(shards[0]) == test_support::read_bytes(shards[1]));
    if (std::string(dtype) == "f32") {
      const shard::ShardReader reader(shards[1], true);
      const auto& columns = reader.layout().columns;
      const auto answer_column = std::find_if(columns.begin(), columns.end(), [](auto& column) {
        return column.name == "answer_embedding";
      });
      REQUIRE(answer_column != columns.end());
      const auto answer = reader.tensor_data(answer_column - columns.begin());
      // Rows before the first dropped one (5) keep their place.
      CHECK(std::memcmp(answer.data() + 3 * dim * 4, answers.data() + 3 * dim, dim * 4) == 0);
    }
  }
}

TEST_CASE("a .pt whose storages lie at odd offsets packs the same columns as an aligned one") {
  // dialogue_unaligned.pt is dialogue_list.pt rewritten by Python's zipfile, which pads nothing:
  // its rows cannot be checked as floats where they lie and are read instead (sanitizers would
  // report a misaligned read otherwise), and are written from where they lie all the same.
  test_support::ScratchDir scratch;
  const std::string data = std::string(GPUCACHE_TEST_DATA) + "/pt/";
  std::vector<std::vector<std::vector<std::byte>>> columns;
  for (const char* name : {"dialogue_list.pt", "dialogue_unaligned.pt"}) {
    PackOptions options;
    options.inputs = {data + name};
    options.output_dir = scratch / name;
    const auto result = pack(options);
    REQUIRE(result.shards.size() == 1);
    CHECK(verify(options.output_dir).ok());
    const shard::ShardReader reader(options.output_dir + "/" + result.shards[0].file, true);
    std::vector<std::vector<std::byte>> tensors;
    for (std::size_t c = 0; c < reader.layout().columns.size(); ++c)
      if (reader.layout().columns[c].kind == ColumnKind::tensor) {
        const auto bytes = reader.tensor_data(c);
        tensors.emplace_back(bytes.begin(), bytes.end());
      }
    columns.push_back(std::move(tensors));
  }
  REQUIRE(columns[0].size() == 4);  // question_embedding, answer_embedding, @source, @source_row
  CHECK(columns[0] == columns[1]);
}

TEST_CASE("inputs with different dims are refused, listing every file and its dim") {
  test_support::ScratchDir scratch;
  save_f32(scratch / "a.npy", random_rows(4, 8, 1), 4, 8);
  save_f32(scratch / "b.npy", random_rows(4, 9, 1), 4, 9);
  PackOptions options;
  options.inputs = {scratch / "a.npy", scratch / "b.npy"};
  options.output_dir = scratch / "ds";
  try {
    pack(options);
    FAIL("expected an error");
  } catch (const Error& error) {
    const std::string text = error.what();
    CHECK(text.find("a.npy: embedding f32 [8]") != std::string::npos);
    CHECK(text.find("b.npy: embedding f32 [9]") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(scratch / "ds"));
}

TEST_CASE("an existing dataset is replaced only with force") {
  test_support::ScratchDir scratch;
  save_f32(scratch / "a.npy", random_rows(4, 8, 1), 4, 8);
  PackOptions options;
  options.inputs = {scratch / "a.npy"};
  options.output_dir = scratch / "ds";
  pack(options);
  CHECK_THROWS_WITH_AS(pack(options), doctest::Contains("--force"), Error);
  options.force = true;
  options.dtype = DType::f16;
  pack(options);
  CHECK(verify(scratch / "ds").ok());
}

TEST_CASE("a pack that fails while writing leaves no dataset files behind") {
  test_support::ScratchDir scratch;
  save_f32(scratch / "a.npy", random_rows(40, 8, 1), 40, 8);
  fs::create_directories(scratch / "ds");
  // A directory squatting on the second shard's temporary name makes its creation fail midway.
  fs::create_directories(scratch / "ds/shard-00001.gcs.tmp");
  PackOptions options;
  options.inputs = {scratch / "a.npy"};
  options.output_dir = scratch / "ds";
  options.shard_rows = 10;
  CHECK_THROWS_AS(pack(options), Error);
  CHECK_FALSE(fs::exists(scratch / "ds/shard-00000.gcs"));
  CHECK_FALSE(fs::exists(scratch / "ds/manifest.json"));
}

TEST_CASE("f64 big-endian Fortran input is kept as f64; --dtype f32 converts it through f32") {
  PackOptions options;
  test_support::ScratchDir scratch;
  options.inputs = {test_support::data_path("npy/f64_big_fortran.npy")};
  options.output_dir = scratch / "ds";
  CHECK(pack(options).conversions.empty());
  {
    shard::ShardReader reader(scratch / "ds/shard-00000.gcs");
    const auto& column = reader.layout().columns[0];
    CHECK(column.dtype == DType::f64);
    CHECK(column.row_pitch_bytes() == 16 * 8);  // 5 values padded to 16
    // The f64 values as the input holds them (byte-swapped, C order), read by the npy reader.
    const auto input = read_npy(test_support::data_path("npy/f64_big_fortran.npy"));
    std::vector<double> want(7 * 5);
    input.as_tensor()->copy_row_major(0, std::as_writable_bytes(std::span(want)));
    for (std::uint64_t r = 0; r < 7; ++r) {
      CHECK(std::memcmp(reader.tensor_data(0).data() + r * 128, want.data() + r * 5, 40) == 0);
      for (std::uint64_t b = 40; b < 128; ++b)
        CHECK(reader.tensor_data(0)[r * 128 + b] == std::byte{0});
    }
  }
  options.force = true;
  options.dtype = DType::f32;
  const PackResult converted = pack(options);
  REQUIRE(converted.conversions.size() == 1);
  CHECK(converted.conversions[0].from == DType::f64);
  CHECK(converted.conversions[0].to == DType::f32);
  CHECK(converted.conversions[0].asked);
  CHECK_FALSE(converted.conversions[0].exact);
  shard::ShardReader reader(scratch / "ds/shard-00000.gcs");
  CHECK(reader.layout().columns[0].dtype == DType::f32);
  const auto want = read_npy(test_support::data_path("npy/f32_c.npy"));
  const float* expected =
      reinterpret_cast<const float*>(want.as_tensor()->contiguous_bytes().data());
  for (std::uint64_t r = 0; r < 7; ++r)
    CHECK(std::memcmp(reader.tensor_data(0).data() + r * 64, expected + r * 5, 20) == 0);
}

TEST_CASE("an f64 embedding is stored as f64, padded, and norm-checked on its f64 values") {
  test_support::ScratchDir scratch;
  // Row 1's norm is just below 0.1 and row 2's just above 100 in f64; rounded to f32 both
  // would pass (0.1f > 0.1, f32(100 + 1e-11) == 100). Rows 0 and 3 pass either way; row 3's
  // values are not f32 values.
  const std::vector<std::vector<double>> rows{{3, 4, 0, 0, 0},
                                              {std::nextafter(0.1, 0.0), 0, 0, 0, 0},
                                              {100 + 1e-11, 0, 0, 0, 0},
                                              {0.5, 0.25, 1.0 / 3, 0.2, 1.0 / 7}};
  std::vector<double> values;
  for (const auto& row : rows) values.insert(values.end(), row.begin(), row.end());
  test_support::save_npy(scratch / "emb.npy", DType::f64, {4, 5}, values);
  PackOptions options;
  options.inputs = {scratch / "emb.npy"};
  options.output_dir = scratch / "ds";
  const PackResult result = pack(options);
  CHECK(result.conversions.empty());
  CHECK(result.rows == 2);
  CHECK(result.dropped[static_cast<std::size_t>(DropReason::norm_low)] == 1);
  CHECK(result.dropped[static_cast<std::size_t>(DropReason::norm_high)] == 1);
  const auto manifest = test_support::manifest_json(options.output_dir);
  CHECK(manifest["columns"][0]["name"] == "embedding");
  CHECK(manifest["columns"][0]["dtype"] == "f64");
  CHECK(manifest["columns"][0]["padded_dim"] == 16);
  auto stored_row = [&](const std::string& dir, std::uint64_t r) {
    shard::ShardReader reader(dir + "/shard-00000.gcs");
    std::vector<double> row(16);
    std::memcpy(row.data(), reader.tensor_data(0).data() + r * 128, 128);
    return row;
  };
  const std::vector<std::pair<std::uint64_t, std::size_t>> kept{{0, 0}, {1, 3}};
  for (const auto& [stored, input] : kept) {
    const auto row = stored_row(options.output_dir, stored);
    CHECK(std::memcmp(row.data(), rows[input].data(), 40) == 0);  // bit-identical
    for (std::size_t i = 5; i < 16; ++i) CHECK(std::bit_cast<std::uint64_t>(row[i]) == 0);
  }
  VerifyOptions deep;
  deep.deep = true;  // re-checks the norms on the stored f64 values: the same verdicts
  CHECK(verify(options.output_dir, deep).ok());

  // Normalised, the rows stay f64: each value divided by the row's f64 norm.
  options.output_dir = scratch / "normalized";
  options.validation.normalize = true;
  CHECK(pack(options).rows == 2);
  CHECK(test_support::manifest_json(options.output_dir)["columns"][0]["dtype"] == "f64");
  for (const auto& [stored, input] : kept) {
    const auto row = stored_row(options.output_dir, stored);
    double squares = 0;
    for (const double x : rows[input]) squares += x * x;
    for (std::size_t i = 0; i < 5; ++i)
      CHECK(row[i] == doctest::Approx(rows[input][i] / std::sqrt(squares)).epsilon(1e-15));
    for (std::size_t i = 5; i < 16; ++i) CHECK(row[i] == 0.0);
  }
  CHECK(stored_row(options.output_dir, 0)[0] == 0.6);  // 3 / 5, one rounding
  CHECK(verify(options.output_dir, deep).ok());

  // Asked for f32 (--dtype f32 or --dtype embedding=f32): converted, checked as f32, reported.
  options.validation.normalize = false;
  for (const bool by_column : {false, true}) {
    CAPTURE(by_column);
    options.output_dir = scratch / (by_column ? "by_column" : "f32");
    options.dtype.reset();
    options.column_dtypes.clear();
    if (by_column)
      options.column_dtypes = {{"embedding", DType::f32}};
    else
      options.dtype = DType::f32;
    const PackResult f32 = pack(options);
    CHECK(f32.rows == 4);  // rounded to f32, rows 1 and 2 are inside the bounds
    REQUIRE(f32.conversions.size() == 1);
    CHECK(f32.conversions[0].column == "embedding");
    CHECK(f32.conversions[0].asked);
    CHECK_FALSE(f32.conversions[0].exact);
    CHECK(test_support::manifest_json(options.output_dir)["columns"][0]["dtype"] == "f32");
  }

  // An f64 embedding beside an f32 input of the same column: refused unless --dtype says.
  const std::vector<float> singles{1, 2, 3, 4, 5};
  test_support::save_npy(scratch / "f32.npy", DType::f32, {1, 5}, singles);
  options.dtype.reset();
  options.column_dtypes.clear();
  options.inputs = {scratch / "emb.npy", scratch / "f32.npy"};
  options.output_dir = scratch / "mixed";
  CHECK_THROWS_WITH_AS(pack(options),
                       doctest::Contains("column 'embedding': holds f32 values, while an input "
                                         "before it holds f64"),
                       Error);
  options.dtype = DType::f32;
  CHECK(pack(options).rows == 5);
}
