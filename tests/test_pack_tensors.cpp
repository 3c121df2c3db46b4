// Packing general tensor datasets (issue #14): rows of any shape and dtype, columns from files of
// their own, roles, per-column storage types, sequences, splits, and a pack that keeps no rows.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "gpucache/error.hpp"
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

constexpr std::uint64_t kRows = 40;

// The images of an image dataset: [kRows, 3, 4, 5] u8 (small, for speed), labels [kRows] i64,
// keypoints [kRows, 21, 3] f32 with every third row all zero (missing), weights [kRows] f32 in
// [0, 0.2).
struct ImageFiles {
  std::string images, labels, keypoints, weights;
  std::vector<std::uint8_t> image_values;
  std::vector<std::int64_t> label_values;
  std::vector<float> keypoint_values, weight_values;
};

ImageFiles write_image_files(const test_support::ScratchDir& scratch) {
  ImageFiles files{scratch / "images.npy",
                   scratch / "labels.npy",
                   scratch / "keypoints.npy",
                   scratch / "weights.npy",
                   {},
                   {},
                   {},
                   {}};
  for (std::uint64_t i = 0; i < kRows * 60; ++i)
    files.image_values.push_back(static_cast<std::uint8_t>(i * 7 % 251));
  for (std::uint64_t r = 0; r < kRows; ++r) {
    files.label_values.push_back(static_cast<std::int64_t>(r % 10) - 3);
    files.weight_values.push_back(static_cast<float>(r) * 0.005f);
    for (int k = 0; k < 63; ++k)
      files.keypoint_values.push_back(r % 3 == 0 ? 0.0f : static_cast<float>(r) + k * 0.25f);
  }
  test_support::save_npy(files.images, DType::u8, {kRows, 3, 4, 5}, files.image_values);
  test_support::save_npy(files.labels, DType::i64, {kRows}, files.label_values);
  test_support::save_npy(files.keypoints, DType::f32, {kRows, 21, 3}, files.keypoint_values);
  test_support::save_npy(files.weights, DType::f32, {kRows}, files.weight_values);
  return files;
}

// Every row of a tensor column across the dataset's shards, as stored (row_pitch_bytes each).
std::vector<std::byte> column_bytes(const std::string& dir, const std::string& column) {
  std::vector<std::byte> bytes;
  for (std::uint32_t s = 0; fs::exists(dir + "/" + shard::shard_file_name(s)); ++s) {
    shard::ShardReader reader(dir + "/" + shard::shard_file_name(s));
    const auto data = reader.tensor_data(*reader.find_column(column));
    bytes.insert(bytes.end(), data.begin(), data.end());
  }
  return bytes;
}

// bf16 as torch rounds f32: to nearest, ties to even.
std::uint16_t bf16_of(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  return static_cast<std::uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

}  // namespace

TEST_CASE("an image dataset packs from one file per column, each column in its own shape") {
  test_support::ScratchDir scratch;
  const ImageFiles files = write_image_files(scratch);
  PackOptions options;
  options.output_dir = scratch / "ds";
  for (const char* text : {"images=", "labels=", "keypoints=", "weights="}) {
    const std::string name(text);
    const std::string file = name == "images="      ? files.images
                             : name == "labels="    ? files.labels
                             : name == "keypoints=" ? files.keypoints
                                                    : files.weights;
    options.fields.push_back(parse_field_spec(name + file));
  }
  REQUIRE(options.fields[0].file == files.images);
  const PackResult result = pack(options);
  // Nothing is dropped: missing keypoints are zero rows and small weights are fine; only float
  // columns are checked, and only for finite values.
  CHECK(result.rows == kRows);
  CHECK(verify(options.output_dir).ok());

  const auto manifest = test_support::manifest_json(options.output_dir);
  std::map<std::string, nlohmann::json> columns;
  for (const auto& column : manifest["columns"]) columns[column["name"]] = column;
  CHECK(columns["images"]["shape"] == nlohmann::json::array({kRows, 3, 4, 5}));
  CHECK(columns["images"]["dtype"] == "u8");
  CHECK(columns["images"]["role"] == "tensor");
  CHECK(columns["images"]["row_pitch_bytes"] == 60);  // dense: no padding
  CHECK(columns["labels"]["shape"] == nlohmann::json::array({kRows}));
  CHECK(columns["labels"]["row_pitch_bytes"] == 8);
  CHECK(columns["keypoints"]["shape"] == nlohmann::json::array({kRows, 21, 3}));
  CHECK(columns["keypoints"]["row_pitch_bytes"] == 252);
  CHECK(columns["weights"]["shape"] == nlohmann::json::array({kRows}));

  // Rows are stored in input order, byte for byte.
  const auto images = column_bytes(options.output_dir, "images");
  REQUIRE(images.size() == files.image_values.size());
  CHECK(std::memcmp(images.data(), files.image_values.data(), images.size()) == 0);
  const auto labels = column_bytes(options.output_dir, "labels");
  REQUIRE(labels.size() == kRows * 8);
  CHECK(std::memcmp(labels.data(), files.label_values.data(), labels.size()) == 0);
  const auto keypoints = column_bytes(options.output_dir, "keypoints");
  CHECK(std::memcmp(keypoints.data(), files.keypoint_values.data(), keypoints.size()) == 0);
  // A [21, 3] f32 row is not a multiple of 16 bytes: the shard is format 1.2.
  shard::ShardReader reader(options.output_dir + "/shard-00000.gcs");
  CHECK(reader.layout().header.version_minor == 2);
  CHECK(reader.layout().header.has_row_shapes());
}

TEST_CASE("--dtype COLUMN=TYPE converts one float column as torch rounds it") {
  test_support::ScratchDir scratch;
  std::vector<float> images(kRows * 12);
  for (std::size_t i = 0; i < images.size(); ++i) images[i] = 1.0f / static_cast<float>(i + 3);
  test_support::save_npy(scratch / "images.npy", DType::f32, {kRows, 3, 2, 2}, images);
  PackOptions options;
  options.inputs = {scratch / "images.npy"};
  options.output_dir = scratch / "ds";
  options.column_dtypes = {{"images", DType::bf16}};
  pack(options);
  const auto manifest = test_support::manifest_json(options.output_dir);
  CHECK(manifest["columns"][0]["name"] == "images");
  CHECK(manifest["columns"][0]["dtype"] == "bf16");
  CHECK(manifest["options"]["column_dtypes"]["images"] == "bf16");
  const auto stored = column_bytes(options.output_dir, "images");
  REQUIRE(stored.size() == images.size() * 2);
  for (std::size_t i = 0; i < images.size(); ++i) {
    std::uint16_t value;
    std::memcpy(&value, stored.data() + 2 * i, 2);
    CHECK(value == bf16_of(images[i]));
  }
}

TEST_CASE("--dtype COLUMN=TYPE stores u8 images as bf16, exactly, and reports it") {
  test_support::ScratchDir scratch;
  const ImageFiles files = write_image_files(scratch);
  PackOptions options;
  options.output_dir = scratch / "ds";
  options.fields = {parse_field_spec("images=" + files.images),
                    parse_field_spec("labels=" + files.labels)};
  options.column_dtypes = {{"images", DType::bf16}};
  const PackResult result = pack(options);
  CHECK(result.rows == kRows);
  const auto manifest = test_support::manifest_json(options.output_dir);
  CHECK(manifest["columns"][0]["dtype"] == "bf16");
  CHECK(manifest["columns"][0]["shape"] == nlohmann::json::array({kRows, 3, 4, 5}));
  CHECK(manifest["columns"][1]["dtype"] == "i64");  // the labels keep their type
  // Every u8 value is a bf16 value: the stored rows are the images, exactly.
  const auto stored = column_bytes(options.output_dir, "images");
  REQUIRE(stored.size() == files.image_values.size() * 2);
  for (std::size_t i = 0; i < files.image_values.size(); ++i) {
    std::uint16_t value;
    std::memcpy(&value, stored.data() + 2 * i, 2);
    CHECK(value == bf16_of(static_cast<float>(files.image_values[i])));
    CHECK(std::bit_cast<float>(std::uint32_t{value} << 16) ==
          static_cast<float>(files.image_values[i]));
  }
  REQUIRE(result.conversions.size() == 1);
  CHECK(result.conversions[0].column == "images");
  CHECK(result.conversions[0].from == DType::u8);
  CHECK(result.conversions[0].to == DType::bf16);
  CHECK(result.conversions[0].asked);
  CHECK(result.conversions[0].exact);
  const auto json = nlohmann::json::parse(result.to_json());
  CHECK(json["stored_as"][0]["exact"] == true);
  CHECK(verify(options.output_dir).ok());
}

TEST_CASE(
    "--dtype COLUMN=TYPE: f64 to f32 is lossy and reported; a conversion the table lacks "
    "is an error naming the column and what it allows") {
  test_support::ScratchDir scratch;
  // [3, 2] rows: a tensor column (a float vector would be an embedding, converted anyway).
  std::vector<double> values(kRows * 6);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 1.0 / static_cast<double>(i + 3);
  test_support::save_npy(scratch / "features.npy", DType::f64, {kRows, 3, 2}, values);
  PackOptions options;
  options.fields = {parse_field_spec("features=" + (scratch / "features.npy"))};
  options.output_dir = scratch / "ds";
  // Without --dtype an f64 tensor stays f64.
  CHECK(pack(options).conversions.empty());
  CHECK(test_support::manifest_json(options.output_dir)["columns"][0]["dtype"] == "f64");
  options.force = true;
  options.column_dtypes = {{"features", DType::f32}};
  const PackResult result = pack(options);
  REQUIRE(result.conversions.size() == 1);
  CHECK(result.conversions[0].asked);
  CHECK_FALSE(result.conversions[0].exact);
  const auto stored = column_bytes(options.output_dir, "features");
  REQUIRE(stored.size() == values.size() * 4);
  for (std::size_t i = 0; i < values.size(); ++i) {
    float value;
    std::memcpy(&value, stored.data() + 4 * i, 4);
    CHECK(value == static_cast<float>(values[i]));
  }

  // u16 reaches past f16's largest value: refused, naming the column and the allowed targets.
  std::vector<std::uint16_t> counts(kRows, 65535);
  test_support::save_npy(scratch / "counts.npy", DType::u16, {kRows}, counts);
  options.fields = {parse_field_spec("counts=" + (scratch / "counts.npy"))};
  options.column_dtypes = {{"counts", DType::f16}};
  try {
    pack(options);
    FAIL("u16 stored as f16 was not refused");
  } catch (const Error& error) {
    const std::string message = error.what();
    CHECK(message.find("counts.npy") != std::string::npos);
    CHECK(message.find("column 'counts'") != std::string::npos);
    CHECK(message.find("--dtype counts=f16") != std::string::npos);
    CHECK(message.find("may be stored as f32 or bf16") != std::string::npos);
  }
  // Integers to an integer type: no such conversion.
  options.column_dtypes = {{"counts", DType::i32}};
  CHECK_THROWS_WITH_AS(pack(options), doctest::Contains("u16 may be stored as f32 or bf16"), Error);
  // The same type is no conversion: accepted, stored as it is.
  options.column_dtypes = {{"counts", DType::u16}};
  CHECK(pack(options).conversions.empty());
}

TEST_CASE("an f64 column stored as f64 is checked on its f64 values, a converted one on f32's") {
  test_support::ScratchDir scratch;
  // Rows of [3, 2]: 1e100 (finite in f64, infinite as f32), 1e-50 (nonzero in f64, zero as
  // f32), NaN, and an ordinary row.
  const std::vector<double> firsts{1e100, 1e-50, NAN, 0.5};
  std::vector<double> values;
  for (const double first : firsts)
    for (int k = 0; k < 6; ++k) values.push_back(k == 0 ? first : (first == 1e-50 ? 0.0 : 1.0));
  test_support::save_npy(scratch / "features.npy", DType::f64, {4, 3, 2}, values);
  PackOptions options;
  options.fields = {parse_field_spec("features=" + (scratch / "features.npy"))};
  options.checks = {parse_checks_spec("features=finite,nonzero")};
  options.output_dir = scratch / "kept";
  PackResult result = pack(options);
  CHECK(result.rows == 3);  // only the NaN row is dropped
  CHECK(result.dropped[static_cast<std::size_t>(DropReason::nan_inf)] == 1);
  CHECK(result.dropped[static_cast<std::size_t>(DropReason::zero)] == 0);
  VerifyOptions deep;
  deep.deep = true;  // re-runs the recorded checks on the stored f64 rows: the same verdicts
  CHECK(verify(options.output_dir, deep).ok());
  // Stored as f32 (asked), the rows are checked as stored: 1e100 overflows, 1e-50 is zero.
  options.output_dir = scratch / "converted";
  options.column_dtypes = {{"features", DType::f32}};
  result = pack(options);
  CHECK(result.rows == 1);
  CHECK(result.dropped[static_cast<std::size_t>(DropReason::nan_inf)] == 2);
  CHECK(result.dropped[static_cast<std::size_t>(DropReason::zero)] == 1);
}

TEST_CASE("token ids of varying length pack as a sequence column, empty rows included") {
  test_support::ScratchDir scratch;
  {
    std::ofstream jsonl(scratch / "tokens.jsonl");
    jsonl << "{\"text\": \"a\", \"tokens\": [1, 2, 3]}\n"
          << "{\"text\": \"b\", \"tokens\": []}\n"
          << "{\"text\": \"c\", \"tokens\": [7]}\n"
          << "{\"text\": \"d\", \"tokens\": [4, 5, 6, 7, 8]}\n";
  }
  PackOptions options;
  options.inputs = {scratch / "tokens.jsonl"};
  options.output_dir = scratch / "ds";
  options.kind = SourceKind::tensors;
  options.fields = {parse_field_spec("text=[*].text"), parse_field_spec("tokens=[*].tokens")};
  options.roles = {parse_role_spec("tokens=sequence")};
  pack(options);
  CHECK(verify(options.output_dir).ok());
  shard::ShardReader reader(options.output_dir + "/shard-00000.gcs");
  const std::size_t tokens = *reader.find_column("tokens");
  CHECK(reader.layout().columns[tokens].kind == ColumnKind::sequence);
  const std::vector<std::vector<double>> expected{{1, 2, 3}, {}, {7}, {4, 5, 6, 7, 8}};
  const DType dtype = reader.layout().columns[tokens].dtype;
  for (std::uint64_t r = 0; r < expected.size(); ++r) {
    const auto values = reader.values(tokens, r);
    REQUIRE(values.size() == expected[r].size() * dtype_size(dtype));
    for (std::size_t i = 0; i < expected[r].size(); ++i) {
      double value = 0;
      if (dtype == DType::i64) {
        std::int64_t v;
        std::memcpy(&v, values.data() + 8 * i, 8);
        value = static_cast<double>(v);
      } else {
        float v;
        std::memcpy(&v, values.data() + 4 * i, 4);
        value = v;
      }
      CHECK(value == expected[r][i]);
    }
  }
  CHECK(test_support::manifest_json(options.output_dir)["columns"][1]["shape"] ==
        nlohmann::json::array({4, nullptr}));
}

TEST_CASE("rows of token ids, labels and text pack without flags, one column each") {
  test_support::ScratchDir scratch;
  {
    std::ofstream jsonl(scratch / "tokens.jsonl");
    jsonl << "{\"text\": \"a\", \"tokens\": [1, 2, 3], \"label\": 4}\n"
          << "{\"text\": \"b\", \"tokens\": [], \"label\": 0}\n"
          << "{\"text\": \"c\", \"tokens\": [7], \"label\": -1}\n";
  }
  const auto cli = test_support::run_cli(
      {"pack", scratch / "tokens.jsonl", "-o", scratch / "ds", "--json", "-q"});
  CAPTURE(cli.err);
  REQUIRE(cli.exit_code == 0);
  shard::ShardReader reader(scratch / "ds/shard-00000.gcs");
  const auto& columns = reader.layout().columns;
  const auto kind_of = [&](const std::string& name) {
    const auto index = reader.find_column(name);
    REQUIRE(index);
    return std::pair{columns[*index].kind, columns[*index].dtype};
  };
  CHECK(kind_of("tokens") == std::pair{ColumnKind::sequence, DType::i64});
  CHECK(kind_of("label") == std::pair{ColumnKind::tensor, DType::i64});
  CHECK(kind_of("text").first == ColumnKind::text);
  const auto third = reader.values(*reader.find_column("tokens"), 2);
  std::int64_t seven = 0;
  REQUIRE(third.size() == 8);
  std::memcpy(&seven, third.data(), 8);
  CHECK(seven == 7);
}

TEST_CASE("--split writes disjoint, complete, deterministic splits, one dataset each") {
  test_support::ScratchDir scratch;
  std::vector<float> rows(1000 * 8);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = std::sin(static_cast<float>(i)) + 2.0f;
  test_support::save_npy(scratch / "emb.npy", DType::f32, {1000, 8}, rows);
  auto run = [&](const std::string& out, std::uint64_t seed) {
    PackOptions options;
    options.inputs = {scratch / "emb.npy"};
    options.output_dir = scratch / out;
    options.splits = parse_split_spec("train=0.8,val=0.2");
    options.validation.seed = seed;
    return pack(options);
  };
  const PackResult result = run("a", 5);
  REQUIRE(result.splits.size() == 2);
  CHECK(result.splits[0].name == "train");
  CHECK(result.rows == 1000);
  CHECK(result.splits[0].rows + result.splits[1].rows == 1000);
  CHECK(result.splits[0].rows > 700);
  CHECK(result.splits[0].rows < 900);
  std::set<std::uint64_t> seen;
  for (const char* split : {"train", "val"}) {
    const std::string dir = scratch / (std::string("a/") + split);
    CHECK(verify(dir).ok());
    const auto manifest = test_support::manifest_json(dir);
    CHECK(manifest["split"]["name"] == split);
    CHECK(manifest["split"]["rows"]["train"] == result.splits[0].rows);
    CHECK(manifest["split"]["seed"] == 5);
    const auto source_rows = column_bytes(dir, "@source_row");
    for (std::size_t i = 0; i < source_rows.size() / 8; ++i) {
      std::int64_t row;
      std::memcpy(&row, source_rows.data() + 8 * i, 8);
      CHECK(seen.insert(row).second);  // disjoint
    }
  }
  CHECK(seen.size() == 1000);  // complete
  run("b", 5);                 // the same seed: the same bytes
  for (const char* file : {"train/manifest.json", "val/shard-00000.gcs"})
    CHECK(test_support::read_bytes(scratch / (std::string("a/") + file)) ==
          test_support::read_bytes(scratch / (std::string("b/") + file)));
  const PackResult other = run("c", 6);  // another seed: another split
  CHECK(other.splits[0].rows != result.splits[0].rows);
  CHECK_THROWS_WITH_AS(parse_split_spec("train=0.9,val"), doctest::Contains("NAME=FRACTION"),
                       UsageError);
  PackOptions bad;
  bad.inputs = {scratch / "emb.npy"};
  bad.output_dir = scratch / "bad";
  bad.splits = parse_split_spec("train=0.9,val=0.2");
  CHECK_THROWS_WITH_AS(pack(bad), doctest::Contains("add up to"), UsageError);
  CHECK_FALSE(fs::exists(scratch / "bad/train"));
}

TEST_CASE("a pack that keeps no row fails with the drop counts and leaves nothing") {
  test_support::ScratchDir scratch;
  std::vector<float> rows(20 * 4, std::nanf(""));
  for (std::size_t r = 10; r < 20; ++r)
    for (std::size_t k = 0; k < 4; ++k) rows[r * 4 + k] = 0.0f;
  test_support::save_npy(scratch / "bad.npy", DType::f32, {20, 4}, rows);
  PackOptions options;
  options.inputs = {scratch / "bad.npy"};
  options.output_dir = scratch / "ds";
  try {
    pack(options);
    FAIL("no error");
  } catch (const Error& error) {
    const std::string text = error.what();
    CHECK(text.find("no row is kept") != std::string::npos);
    CHECK(text.find("10 nan_inf") != std::string::npos);
    CHECK(text.find("10 zero") != std::string::npos);
    CHECK(text.find('\n') == std::string::npos);
  }
  CHECK_FALSE(fs::exists(scratch / "ds"));  // refused before any output directory was made
  const auto cli = test_support::run_cli(
      {"pack", scratch / "bad.npy", "-o", scratch / "cli", "--split", "a=0.5,b=0.5"});
  CHECK(cli.exit_code == 2);
  CHECK(cli.err.find("no row is kept") != std::string::npos);
}

TEST_CASE("a column from a file of its own must have the input's rows and one array") {
  test_support::ScratchDir scratch;
  test_support::save_npy(scratch / "a.npy", DType::i64, {5},
                         std::vector<std::int64_t>{1, 2, 3, 4, 5});
  test_support::save_npy(scratch / "b.npy", DType::i64, {6},
                         std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
  PackOptions options;
  options.output_dir = scratch / "ds";
  options.fields = {parse_field_spec("a=" + scratch / "a.npy"),
                    parse_field_spec("b=" + scratch / "b.npy")};
  CHECK_THROWS_WITH_AS(pack(options), doctest::Contains("has 6 rows but"), Error);
  CHECK(parse_field_spec("x=" + scratch / "a.npy:.").file == scratch / "a.npy");
  CHECK(parse_field_spec("x=data.vectors").file.empty());
}
