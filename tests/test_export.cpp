// gpucache export: every column kind to .npy and to safetensors (read back by gpucache's own
// readers, byte for byte), column choice, corruption, and re-packing an export through the CLI.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "export_test_dataset.hpp"
#include "gpucache/error.hpp"
#include "gpucache/export.hpp"
#include "gpucache/npy.hpp"
#include "gpucache/readers.hpp"
#include "gpucache/safetensors.hpp"
#include "gpucache/shard/shard_layout.hpp"
#include "gpucache/shard_io/shard_writer.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace ds = gpucache::test::export_dataset;
namespace fs = std::filesystem;
using test_support::data_path;
using test_support::run_cli;

namespace {

// An array as an export must hold it: dtype, shape and row-major little-endian bytes.
struct Expected {
  DType dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;
};

template <typename T>
void append(std::vector<std::byte>& bytes, T value) {
  const auto at = bytes.size();
  bytes.resize(at + sizeof(T));
  std::memcpy(bytes.data() + at, &value, sizeof(T));
}

// Every array of rows [first, first + rows) of the export dataset, by name as safetensors names
// them (NAME, NAME.values, NAME.offsets, NAME.bytes). With `npy`, bf16 is widened to f32.
std::map<std::string, Expected> expected_arrays(std::uint64_t first, std::uint64_t rows, bool npy) {
  const auto n = static_cast<std::int64_t>(rows);
  const DType bf16 = npy ? DType::f32 : DType::bf16;
  auto put_bf16 = [&](std::vector<std::byte>& bytes, float value) {
    if (npy)
      append(bytes, value);
    else
      append(bytes, ds::to_bf16(value));
  };
  std::map<std::string, Expected> arrays{
      {"image", {DType::u8, {n, 3, 4, 5}, {}}}, {"pixels", {DType::f32, {n, 2, 3}, {}}},
      {"patches", {DType::f32, {n, 2, 3}, {}}}, {"embedding", {bf16, {n, 5}, {}}},
      {"half", {DType::f16, {n, 3}, {}}},       {"dense", {DType::f32, {n, 7}, {}}},
      {"label", {DType::i64, {n}, {}}},         {"flag", {DType::boolean, {n}, {}}},
      {"tokens.values", {DType::i32, {0}, {}}}, {"tokens.offsets", {DType::i64, {n + 1}, {}}},
      {"weights.values", {bf16, {0}, {}}},      {"weights.offsets", {DType::i64, {n + 1}, {}}},
      {"caption.bytes", {DType::u8, {0}, {}}},  {"caption.offsets", {DType::i64, {n + 1}, {}}},
  };
  std::int64_t tokens = 0, weights = 0, text = 0;
  for (auto name : {"tokens.offsets", "weights.offsets", "caption.offsets"})
    append(arrays[name].bytes, std::int64_t{0});
  for (std::uint64_t row = first; row < first + rows; ++row) {
    for (std::uint64_t i = 0; i < 60; ++i) append(arrays["image"].bytes, ds::image(row, i));
    for (std::uint64_t i = 0; i < 6; ++i) append(arrays["pixels"].bytes, ds::pixels(row, i));
    for (std::uint64_t i = 0; i < 6; ++i) append(arrays["patches"].bytes, ds::patches(row, i));
    for (std::uint64_t j = 0; j < 5; ++j)
      put_bf16(arrays["embedding"].bytes, ds::embedding(row, j));
    for (std::uint64_t j = 0; j < 3; ++j)
      append(arrays["half"].bytes, ds::to_f16(ds::half(row, j)));
    for (std::uint64_t j = 0; j < 7; ++j) append(arrays["dense"].bytes, ds::dense(row, j));
    append(arrays["label"].bytes, ds::label(row));
    append(arrays["flag"].bytes, static_cast<std::uint8_t>(ds::flag(row)));
    for (std::uint64_t k = 0; k < ds::tokens_in(row); ++k, ++tokens)
      append(arrays["tokens.values"].bytes, ds::token(row, k));
    append(arrays["tokens.offsets"].bytes, tokens);
    for (std::uint64_t k = 0; k < ds::weights_in(row); ++k, ++weights)
      put_bf16(arrays["weights.values"].bytes, ds::weight(row, k));
    append(arrays["weights.offsets"].bytes, weights);
    for (char c : ds::caption(row)) append(arrays["caption.bytes"].bytes, c);
    text += static_cast<std::int64_t>(ds::caption(row).size());
    append(arrays["caption.offsets"].bytes, text);
  }
  arrays["tokens.values"].shape = {tokens};
  arrays["weights.values"].shape = {weights};
  arrays["caption.bytes"].shape = {text};
  return arrays;
}

void check_tensor(const Tensor& tensor, const Expected& expected, const std::string& name) {
  CAPTURE(name);
  CHECK(tensor.dtype == expected.dtype);
  CHECK(tensor.shape == expected.shape);
  REQUIRE(tensor.is_contiguous_le());
  const auto bytes = tensor.contiguous_bytes();
  CHECK(std::vector<std::byte>(bytes.begin(), bytes.end()) == expected.bytes);
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Checks the npy export of rows [first, first + rows) in `dir`.
void check_npy_export(const fs::path& dir, std::uint64_t first, std::uint64_t rows) {
  const auto expected = expected_arrays(first, rows, true);
  for (const auto& [name, array] : expected) {
    if (name.starts_with("caption")) continue;
    const std::string file = (dir / (name + ".npy")).string();
    REQUIRE_MESSAGE(fs::exists(file), file);
    check_tensor(*read_npy(file).as_tensor(), array, name);
  }
  std::vector<std::string> captions;
  for (std::uint64_t row = first; row < first + rows; ++row)
    captions.push_back(nlohmann::json(ds::caption(row)).dump());
  CHECK(lines_of((dir / "caption.jsonl").string()) == captions);
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  if (!fs::exists(dir)) return names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

ExportOptions options_for(ExportFormat format, const std::string& output,
                          std::vector<std::string> columns = {}) {
  ExportOptions options;
  options.format = format;
  options.output = output;
  options.columns = std::move(columns);
  return options;
}

std::string error_of(const std::string& dataset, const ExportOptions& options) {
  try {
    export_dataset(dataset, options);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string manifest_hash_of(const fs::path& dataset) {
  std::ifstream in(dataset / "manifest.json");
  return nlohmann::json::parse(in).at("manifest_hash").get<std::string>();
}

// A single shard file with the given columns and no rows of data beyond their zeros.
std::string single_shard(const fs::path& path, const std::vector<Column>& columns,
                         std::uint64_t rows) {
  shard::ShardBuilder builder(columns, rows, std::vector<std::uint64_t>(columns.size(), 0));
  builder.write(path.string(), {});
  return path.string();
}

}  // namespace

TEST_CASE("npy export: every column kind across shards, uncompressed and compressed") {
  for (int zstd_level : {0, 3}) {
    CAPTURE(zstd_level);
    test_support::ScratchDir scratch;
    ds::write(scratch / "ds", 23, 10, zstd_level);
    const auto result =
        export_dataset(scratch / "ds", options_for(ExportFormat::npy, scratch / "out"));
    check_npy_export(scratch.path() / "out", 0, 23);
    CHECK(result.format == ExportFormat::npy);
    CHECK(result.rows == 23);
    CHECK(result.output == scratch / "out");
    REQUIRE(result.arrays.size() == 13);
    std::uint64_t bytes = 0;
    for (const auto& array : result.arrays) {
      CAPTURE(array.path);
      CHECK(fs::exists(array.path));
      CHECK(array.tensor.empty());
      bytes += fs::file_size(array.path);
    }
    CHECK(result.bytes == bytes);
    CHECK(files_in(scratch.path() / "out").size() == 13);  // no temporaries left
    const auto& embedding = result.arrays[3];
    CHECK(embedding.column == "embedding");
    CHECK(embedding.part == "data");
    CHECK(embedding.dtype == "f32");
    CHECK(embedding.shape == std::vector<std::uint64_t>{23, 5});
    CHECK(embedding.note == "bf16 widened to f32: numpy has no bf16");
    CHECK(result.arrays[0].shape == std::vector<std::uint64_t>{23, 3, 4, 5});
    CHECK(result.arrays[8].part == "values");
    CHECK(result.arrays[8].path == scratch / "out/tokens.values.npy");
    CHECK(result.arrays[9].part == "offsets");
    CHECK(result.arrays[9].dtype == "i64");
    CHECK(result.arrays[10].note == "bf16 widened to f32: numpy has no bf16");
    CHECK(result.arrays[12].part == "text");
    CHECK(result.arrays[12].path == scratch / "out/caption.jsonl");
  }
}

TEST_CASE("safetensors export: gpucache's reader reads back every tensor byte for byte") {
  for (int zstd_level : {0, 3}) {
    CAPTURE(zstd_level);
    test_support::ScratchDir scratch;
    ds::write(scratch / "ds", 23, 10, zstd_level);
    const std::string file = scratch / "out/all.safetensors";
    const auto result =
        export_dataset(scratch / "ds", options_for(ExportFormat::safetensors, file));
    CHECK(result.output == file);
    CHECK(result.bytes == fs::file_size(file));
    CHECK(result.arrays.size() == 14);
    CHECK(files_in(scratch.path() / "out") == std::vector<std::string>{"all.safetensors"});

    const Value root = read_safetensors(file);  // checks the layout: no holes, sizes, offsets
    const Dict& dict = *root.as_dict();
    const auto expected = expected_arrays(0, 23, false);
    REQUIRE(dict.items.size() == expected.size() + 1);
    CHECK(dict.items[0].first == "__metadata__");
    const std::vector<std::string> order{
        "image",          "pixels",          "patches",       "embedding",      "half",
        "dense",          "label",           "flag",          "tokens.values",  "tokens.offsets",
        "weights.values", "weights.offsets", "caption.bytes", "caption.offsets"};
    for (std::size_t i = 0; i < order.size(); ++i) {
      CHECK(dict.items[i + 1].first == order[i]);
      CHECK(result.arrays[i].tensor == order[i]);
      CHECK(result.arrays[i].path == file);
      check_tensor(*dict.items[i + 1].second.as_tensor(), expected.at(order[i]), order[i]);
    }

    const Dict& metadata = *dict.items[0].second.as_dict();
    CHECK(*metadata.find("gpucache.version")->as_string() == GPUCACHE_VERSION);
    CHECK(*metadata.find("gpucache.manifest_hash")->as_string() ==
          manifest_hash_of(scratch.path() / "ds"));
    CHECK(*metadata.find("gpucache.rows")->as_string() == "23");
    const auto columns = nlohmann::json::parse(*metadata.find("gpucache.columns")->as_string());
    REQUIRE(columns.size() == 11);
    CHECK(columns[0] == nlohmann::json::parse(R"({"name": "image", "kind": "tensor", "dtype": "u8",
        "shape": [23, 3, 4, 5], "tensors": {"data": "image"}})"));
    CHECK(columns[8] == nlohmann::json::parse(R"({"name": "tokens", "kind": "sequence",
        "dtype": "i32", "shape": [23, null],
        "tensors": {"values": "tokens.values", "offsets": "tokens.offsets"}})"));
    CHECK(columns[10]["tensors"] ==
          nlohmann::json::parse(R"({"bytes": "caption.bytes", "offsets": "caption.offsets"})"));

    // The header as the format wants it: length, JSON starting with '{', padded with spaces so
    // the data starts at a multiple of 8 bytes.
    const auto bytes = test_support::read_bytes(file);
    std::uint64_t header_size = 0;
    std::memcpy(&header_size, bytes.data(), 8);
    CHECK(header_size % 8 == 0);
    CHECK(bytes[8] == '{');
    const std::string header(bytes.data() + 8, header_size);
    const auto end = header.find_last_not_of(' ');
    CHECK(header[end] == '}');
    CHECK(header_size - end - 1 < 8);
  }
}

TEST_CASE("an empty dataset exports empty arrays, and offsets holding a single 0") {
  test_support::ScratchDir scratch;
  ds::write(scratch / "ds", 0, 10);
  export_dataset(scratch / "ds", options_for(ExportFormat::npy, scratch / "npy"));
  check_npy_export(scratch.path() / "npy", 0, 0);
  const std::string file = scratch / "empty.safetensors";
  export_dataset(scratch / "ds", options_for(ExportFormat::safetensors, file));
  const Value root = read_safetensors(file);
  const auto expected = expected_arrays(0, 0, false);
  for (const auto& [name, array] : expected)
    check_tensor(*root.as_dict()->find(name)->as_tensor(), array, name);
}

TEST_CASE("a single shard file exports alone, and safetensors into a directory takes its name") {
  test_support::ScratchDir scratch;
  ds::write(scratch / "ds", 23, 10);
  const std::string shard = scratch / "ds/shard-00001.gcs";
  export_dataset(shard, options_for(ExportFormat::npy, scratch / "npy"));
  check_npy_export(scratch.path() / "npy", 10, 10);

  fs::create_directories(scratch.path() / "st");
  const auto result = export_dataset(shard, options_for(ExportFormat::safetensors, scratch / "st"));
  CHECK(result.output == (scratch.path() / "st" / "shard-00001.safetensors").string());
  const Value root = read_safetensors(result.output);
  const auto expected = expected_arrays(10, 10, false);
  for (const auto& [name, array] : expected)
    check_tensor(*root.as_dict()->find(name)->as_tensor(), array, name);
  CHECK(root.as_dict()->find("__metadata__")->as_dict()->find("gpucache.manifest_hash") == nullptr);
  // A path ending in '/' is a directory too, created when missing; the dataset's name is its
  // directory's.
  const auto named =
      export_dataset(scratch / "ds", options_for(ExportFormat::safetensors, scratch / "new/"));
  CHECK(fs::path(named.output).filename() == "ds.safetensors");
  CHECK(fs::exists(named.output));
}

TEST_CASE("--column chooses columns in the dataset's order; unknown names are refused") {
  test_support::ScratchDir scratch;
  ds::write(scratch / "ds", 12, 5);
  const auto result = export_dataset(
      scratch / "ds", options_for(ExportFormat::npy, scratch / "npy", {"caption", "tokens"}));
  CHECK(files_in(scratch.path() / "npy") ==
        std::vector<std::string>{"caption.jsonl", "tokens.offsets.npy", "tokens.values.npy"});
  REQUIRE(result.arrays.size() == 3);
  CHECK(result.arrays[0].column == "tokens");
  CHECK(result.arrays[2].column == "caption");

  const auto st = export_dataset(
      scratch / "ds",
      options_for(ExportFormat::safetensors, scratch / "some.safetensors", {"label", "image"}));
  const Value root = read_safetensors(st.output);  // owns the dict
  const Dict& dict = *root.as_dict();
  REQUIRE(dict.items.size() == 3);
  CHECK(dict.items[1].first == "image");
  CHECK(dict.items[2].first == "label");

  const auto error =
      error_of(scratch / "ds", options_for(ExportFormat::npy, scratch / "x", {"nope"}));
  CHECK(contains(error, "no column named 'nope'"));
  CHECK(contains(error, "image, pixels, patches, embedding"));
  CHECK_FALSE(fs::exists(scratch.path() / "x"));
}

TEST_CASE("column names that would clash or cannot be file names are refused") {
  test_support::ScratchDir scratch;
  const auto clash = single_shard(scratch.path() / "clash.gcs",
                                  {{"a", ColumnKind::sequence, DType::i32, {}, 0},
                                   {"a.values", ColumnKind::tensor, DType::f32, {}, 1}},
                                  2);
  CHECK(contains(error_of(clash, options_for(ExportFormat::npy, scratch / "npy")),
                 "would write a.values.npy, which another column writes too"));
  CHECK(contains(error_of(clash, options_for(ExportFormat::safetensors, scratch / "a.st")),
                 "would be written as tensor 'a.values', a name the file already holds"));
  const auto metadata = single_shard(scratch.path() / "metadata.gcs",
                                     {{"__metadata__", ColumnKind::tensor, DType::f32, {}, 1}}, 2);
  CHECK(contains(error_of(metadata, options_for(ExportFormat::safetensors, scratch / "m.st")),
                 "__metadata__"));
  const auto slash = single_shard(scratch.path() / "slash.gcs",
                                  {{"../up", ColumnKind::tensor, DType::f32, {}, 1}}, 2);
  CHECK(contains(error_of(slash, options_for(ExportFormat::npy, scratch / "npy")),
                 "its name cannot be a file name"));
  CHECK_FALSE(fs::exists(scratch.path() / "up.npy"));
  CHECK(files_in(scratch.path() / "npy").empty());
  const auto latin1 = single_shard(scratch.path() / "latin1.gcs",
                                   {{"caf\xe9", ColumnKind::tensor, DType::f32, {}, 1}}, 2);
  CHECK(contains(error_of(latin1, options_for(ExportFormat::safetensors, scratch / "l.st")),
                 "column names: a name is not valid UTF-8"));
  // Through safetensors the same column exports under its own name.
  const auto st = export_dataset(slash, options_for(ExportFormat::safetensors, scratch / "s.st"));
  CHECK(read_safetensors(st.output).as_dict()->find("../up") != nullptr);
}

TEST_CASE("corrupt data is an error, and no output file is left behind") {
  test_support::ScratchDir scratch;
  ds::write(scratch / "ds", 23, 10);
  const std::string shard = scratch / "ds/shard-00001.gcs";
  const auto layout = shard::decode_layout(
      [&] {
        const auto bytes = test_support::read_bytes(shard);
        std::vector<std::byte> out(bytes.size());
        std::memcpy(out.data(), bytes.data(), bytes.size());
        return out;
      }(),
      shard);
  // A byte of the last column's values: the shards before it are exported when it is found.
  test_support::flip_byte(shard, layout.columns.back().aux_offset + 2);
  for (auto format : {ExportFormat::npy, ExportFormat::safetensors}) {
    CAPTURE(export_format_name(format));
    const auto error = error_of(scratch / "ds", options_for(format, scratch / "out/"));
    CHECK(contains(error, "shard-00001.gcs: chunk "));
    CHECK(contains(error, "chunk hash mismatch"));
    CHECK(files_in(scratch.path() / "out").empty());
  }
}

TEST_CASE("the dataset is checked against its manifest before anything is written") {
  test_support::ScratchDir scratch;
  ds::write(scratch / "a", 23, 10);
  ds::write(scratch / "b", 23, 10, 3);
  {
    // The manifest edited: its hash no longer matches.
    std::ifstream in(scratch / "a/manifest.json");
    auto json = nlohmann::ordered_json::parse(in);
    json["tool"]["version"] = "edited";
    std::ofstream(scratch / "a/manifest.json") << json.dump();
    CHECK(contains(error_of(scratch / "a", options_for(ExportFormat::npy, scratch / "out")),
                   "manifest_hash: does not match"));
  }
  // A shard swapped for the same shard of another dataset (same rows, same dataset id). This one
  // is compressed, so the opener's size check (strict mode) finds it before any header is read.
  ds::write(scratch / "c", 23, 10);
  fs::copy_file(scratch / "b/shard-00002.gcs", scratch / "c/shard-00002.gcs",
                fs::copy_options::overwrite_existing);
  CHECK(contains(error_of(scratch / "c", options_for(ExportFormat::npy, scratch / "out")),
                 "shard-00002.gcs: is "));
  CHECK(contains(error_of(scratch / "c", options_for(ExportFormat::npy, scratch / "out")),
                 "bytes but the manifest says"));
  // One of the same size (shard 0 over shard 1): its header hash differs from the recorded one.
  ds::write(scratch / "d", 23, 10);
  REQUIRE(fs::file_size(scratch / "d/shard-00000.gcs") ==
          fs::file_size(scratch / "d/shard-00001.gcs"));
  fs::copy_file(scratch / "d/shard-00000.gcs", scratch / "d/shard-00001.gcs",
                fs::copy_options::overwrite_existing);
  CHECK(contains(error_of(scratch / "d", options_for(ExportFormat::npy, scratch / "out")),
                 "shard-00001.gcs: header: header hash"));
  // A shard missing.
  fs::remove(scratch / "b/shard-00001.gcs");
  CHECK(contains(error_of(scratch / "b", options_for(ExportFormat::npy, scratch / "out")),
                 "missing"));
  CHECK(files_in(scratch.path() / "out").empty());
}

TEST_CASE("sequence offsets that break the rule are refused even when their chunks hash right") {
  test_support::ScratchDir scratch;
  const std::vector<Column> columns{{"tokens", ColumnKind::sequence, DType::i32, {}, 0}};
  shard::ShardBuilder builder(columns, 3, {3 * 4});
  const std::uint64_t offsets[4] = {0, 2, 1, 3};  // row 1 ends before it starts
  std::copy(std::begin(offsets), std::end(offsets), builder.offsets(0).begin());
  const std::string path = scratch / "bad.gcs";
  builder.write(path, {});
  for (auto format : {ExportFormat::npy, ExportFormat::safetensors}) {
    const auto error = error_of(path, options_for(format, scratch / "out/"));
    CHECK(contains(error, "column 'tokens' row 2"));
    CHECK(contains(error, "sequence offsets are not monotonic"));
    CHECK(files_in(scratch.path() / "out").empty());
  }
}

TEST_CASE("CLI: --to safetensors and npy with --json; a bad --to or a corrupt shard exits 2") {
  test_support::ScratchDir scratch;
  ds::write(scratch / "ds", 12, 5);
  const auto st = run_cli({"export", scratch / "ds", "--to", "safetensors", scratch / "out/",
                           "--column", "tokens", "--column", "embedding", "--json"});
  REQUIRE(st.exit_code == 0);
  const auto json = nlohmann::json::parse(st.out);
  CHECK(json["ok"] == true);
  CHECK(json["format"] == "safetensors");
  CHECK(json["output"] == scratch / "out/ds.safetensors");
  CHECK(json["rows"] == 12);
  CHECK(json["bytes"] == fs::file_size(scratch / "out/ds.safetensors"));
  REQUIRE(json["files"].size() == 3);
  CHECK(json["files"][0] == nlohmann::json::parse(R"({"column": "embedding", "part": "data",
      "path": ")" + scratch / "out/ds.safetensors" +
                                                  R"(", "tensor": "embedding", "dtype": "bf16",
      "shape": [12, 5]})"));
  CHECK(json["files"][2]["tensor"] == "tokens.offsets");
  CHECK(json["files"][2]["shape"] == nlohmann::json::array({13}));

  const auto npy = run_cli({"export", scratch / "ds", scratch / "npy", "--column", "weights"});
  REQUIRE(npy.exit_code == 0);
  CHECK(contains(npy.out, "weights.values.npy: f32 [12] (bf16 widened to f32"));
  CHECK(contains(npy.out, "weights.offsets.npy: i64 [13]"));
  const auto text = run_cli(
      {"export", scratch / "ds", "--to", "safetensors", scratch / "t.st", "--column", "caption"});
  REQUIRE(text.exit_code == 0);
  CHECK(contains(text.out, "caption.bytes: u8 ["));
  CHECK(contains(text.out, "caption.offsets: i64 [13]"));

  const auto bad = run_cli({"export", scratch / "ds", "--to", "parquet", scratch / "x"});
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "--to"));

  test_support::flip_byte(scratch / "ds/shard-00000.gcs", 4096 + 3);
  const auto corrupt = run_cli({"export", scratch / "ds", "--to", "safetensors", scratch / "c.st"});
  CHECK(corrupt.exit_code == 2);
  CHECK(corrupt.err.starts_with("gpucache: error: "));
  CHECK(contains(corrupt.err, "chunk hash mismatch"));
  CHECK(std::count(corrupt.err.begin(), corrupt.err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(scratch / "c.st"));
}

TEST_CASE("re-packing an export gives the same column values") {
  test_support::ScratchDir scratch;
  // Two inputs, so the provenance scalars (@source, @source_row) are not just row numbers.
  REQUIRE(run_cli({"pack", data_path("npy/f32_c.npy"), data_path("npy/f64_big_fortran.npy"), "-o",
                   scratch / "a", "--dtype", "bf16", "--shard-rows", "8", "--quiet"})
              .exit_code == 0);
  REQUIRE(run_cli({"export", scratch / "a", scratch / "a_npy"}).exit_code == 0);

  SUBCASE("npy: the embedding column (scalars need one input per column, see test_export.py)") {
    REQUIRE(run_cli({"pack", scratch / "a_npy/embedding.npy", "-o", scratch / "b", "--dtype",
                     "bf16", "--quiet"})
                .exit_code == 0);
    REQUIRE(run_cli({"export", scratch / "b", scratch / "b_npy"}).exit_code == 0);
    CHECK(test_support::read_bytes(scratch / "b_npy/embedding.npy") ==
          test_support::read_bytes(scratch / "a_npy/embedding.npy"));
  }
  SUBCASE("safetensors: the embedding and both scalar columns") {
    REQUIRE(run_cli({"export", scratch / "a", "--to", "safetensors", scratch / "a.safetensors"})
                .exit_code == 0);
    const auto packed = run_cli({"pack", scratch / "a.safetensors", "-o", scratch / "b", "--field",
                                 "embedding=embedding", "--field", "input=[\"@source\"]", "--field",
                                 "input_row=[\"@source_row\"]", "--quiet"});
    REQUIRE_MESSAGE(packed.exit_code == 0, packed.err);
    REQUIRE(run_cli({"export", scratch / "b", scratch / "b_npy"}).exit_code == 0);
    for (const auto& [repacked, original] : std::vector<std::pair<std::string, std::string>>{
             {"embedding", "embedding"}, {"input", "@source"}, {"input_row", "@source_row"}}) {
      CAPTURE(repacked);
      const Value a = read_npy(scratch / ("a_npy/" + original + ".npy"));
      const Value b = read_npy(scratch / ("b_npy/" + repacked + ".npy"));
      CHECK(b.as_tensor()->dtype == a.as_tensor()->dtype);
      CHECK(b.as_tensor()->shape == a.as_tensor()->shape);
      const auto a_bytes = a.as_tensor()->contiguous_bytes();
      const auto b_bytes = b.as_tensor()->contiguous_bytes();
      CHECK(std::equal(a_bytes.begin(), a_bytes.end(), b_bytes.begin(), b_bytes.end()));
    }
    // bf16 stays bf16 through safetensors, so the re-pack stores the same type without --dtype.
    CHECK(contains(run_cli({"inspect", scratch / "b"}).out, "bf16"));
  }
}
