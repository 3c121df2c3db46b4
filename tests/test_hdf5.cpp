// The HDF5 reader on files h5py wrote (tests/data/hdf5, scripts/fixtures/hdf5_fixtures.py): every
// dtype and shape it maps, rows read in ranges from chunked and compressed datasets, the
// ann-benchmarks layout, hostile files, and probe and pack through the real binary. In a build
// without libhdf5 it checks the one-line refusal instead.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gpucache/error.hpp"
#include "gpucache/input.hpp"
#include "gpucache/schema.hpp"
#include "test_support.hpp"

using namespace gpucache;
using test_support::data_path;
using test_support::run_cli;
namespace fs = std::filesystem;

namespace {

bool hdf5_built() {
  return find_input_format("hdf5")->built();
}

std::string fixture(const std::string& name) {
  return data_path("hdf5/" + name);
}

const InputColumn& column_at(const InputData& data, const std::string& path) {
  for (const auto& column : data.columns)
    if (column.path == path) return column;
  FAIL("no column " << path);
  throw std::logic_error("unreachable");
}

std::vector<std::byte> rows_of(const InputColumn& column, std::uint64_t first,
                               std::uint64_t count) {
  std::vector<std::byte> out(count * column.row_elements() * dtype_size(column.dtype));
  read_rows_as(column, first, count, column.dtype, out);
  return out;
}

// The one array of a .npy twin, as bytes.
std::vector<std::byte> npy_bytes(const std::string& path) {
  const InputData data = read_input(path);
  const SourceMapping mapping = map_input(data, path, SourceKind::tensors);
  REQUIRE(mapping.columns.size() == 1);
  return rows_of(mapping.columns.front(), 0, mapping.rows);
}

// What a column of an exported dataset holds (export writes NAME.npy per column).
std::vector<std::byte> exported_column(const std::string& folder, const std::string& name) {
  return npy_bytes(folder + "/" + name + ".npy");
}

nlohmann::json json_of(const test_support::RunResult& result) {
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE_NOTHROW(nlohmann::json::parse(result.out));
  return nlohmann::json::parse(result.out);
}

}  // namespace

TEST_CASE("a build without libhdf5 refuses .h5 inputs with one line saying how to build it in") {
  if (hdf5_built()) return;
  const auto result = run_cli({"probe", fixture("ann.h5")});
  CHECK(result.exit_code == 2);
  CHECK(result.err.find("hdf5 input was not built into this gpucache") != std::string::npos);
  CHECK(result.err.find("-DGPUCACHE_HDF5=ON") != std::string::npos);
}

TEST_CASE("every numeric dataset is a column of its dtype and row shape; strings are text") {
  if (!hdf5_built()) return;
  const InputData data = read_input(fixture("kinds.h5"));
  REQUIRE(data.columnar());
  std::vector<std::string> paths;
  for (const auto& column : data.columns) paths.push_back(column.path);
  // The scalar and the compound dataset are not columns.
  CHECK(paths ==
        std::vector<std::string>{"/codes", "/flags", "/half", "/ids", "/images", "/names"});

  const auto& images = column_at(data, "/images");
  CHECK(images.name == "images");
  CHECK(images.dtype == DType::u8);
  CHECK(images.rows == 12);
  CHECK(images.row_shape == std::vector<std::uint64_t>{3, 4, 2});
  CHECK(rows_of(images, 0, 12) == npy_bytes(fixture("images.npy")));
  // Contiguous and uncompressed: the rows are handed out where they lie in the file.
  REQUIRE(images.direct_rows);
  CHECK(std::memcmp(images.direct_rows(2, 3), rows_of(images, 2, 3).data(), 3 * 24) == 0);

  CHECK(column_at(data, "/half").dtype == DType::f16);
  CHECK(rows_of(column_at(data, "/half"), 0, 12) == npy_bytes(fixture("half.npy")));
  CHECK(column_at(data, "/flags").dtype == DType::boolean);
  CHECK(column_at(data, "/flags").row_shape.empty());
  CHECK(rows_of(column_at(data, "/flags"), 0, 12) == npy_bytes(fixture("flags.npy")));
  CHECK(column_at(data, "/ids").dtype == DType::u16);
  CHECK(rows_of(column_at(data, "/ids"), 0, 12) == npy_bytes(fixture("ids.npy")));

  const auto& names = column_at(data, "/names");
  CHECK(names.kind == ColumnKind::text);
  CHECK(read_text(names, 0) == "row 0: ");
  CHECK(read_text(names, 5) == "row 5: \xc3\xa9\xc3\xa9xxxxx");
  CHECK(read_text(names, 11) == "row 11: \xc3\xa9\xc3\xa9xxxxxxxxxxx");
  const auto& codes = column_at(data, "/codes");
  CHECK(codes.kind == ColumnKind::text);
  CHECK(read_text(codes, 0) == "c00");
  CHECK(read_text(codes, 5) == "c05zzzzz");
  CHECK(read_text(codes, 11) == "c11zzzzz");
}

TEST_CASE("a bfloat16 float type is a bf16 column") {
  if (!hdf5_built()) return;
  const InputData data = read_input(fixture("bf16.h5"));
  const auto& weights = column_at(data, "/weights");
  CHECK(weights.dtype == DType::bf16);
  CHECK(weights.row_shape == std::vector<std::uint64_t>{3});
  std::vector<float> values(12);
  read_rows_as(weights, 0, 4, DType::f32, std::as_writable_bytes(std::span(values)));
  CHECK(values == std::vector<float>{1.0f, -2.5f, 0.15625f, 3.0f, 0.0f, -0.75f, 256.0f, 1.5f, -3.0f,
                                     0.5f, 100.0f, -1.0f});
}

TEST_CASE("variable-length numeric datasets are sequence columns") {
  if (!hdf5_built()) return;
  const InputData data = read_input(fixture("tokens.h5"));
  const auto& tokens = column_at(data, "/tokens");
  CHECK(tokens.kind == ColumnKind::sequence);
  CHECK(tokens.role == ColumnRole::sequence);
  CHECK(tokens.dtype == DType::i32);
  const std::vector<std::vector<std::int32_t>> expected{{1, 2, 3}, {}, {4}, {5, 6, 7, 8, 9}, {-10}};
  REQUIRE(tokens.rows == expected.size());
  const auto& scores = column_at(data, "/scores");
  CHECK(scores.dtype == DType::f64);  // stored big-endian
  for (std::uint64_t row = 0; row < expected.size(); ++row) {
    CAPTURE(row);
    REQUIRE(tokens.row_length(row) == expected[row].size());
    std::vector<std::int32_t> values(expected[row].size());
    tokens.read_sequence(row, std::as_writable_bytes(std::span(values)));
    CHECK(values == expected[row]);
    REQUIRE(scores.row_length(row) == expected[row].size());
    std::vector<double> doubles(expected[row].size());
    scores.read_sequence(row, std::as_writable_bytes(std::span(doubles)));
    for (std::size_t i = 0; i < doubles.size(); ++i) CHECK(doubles[i] == expected[row][i] / 4.0);
  }
}

TEST_CASE("column names come from paths, kept as written where legal, and unique") {
  if (!hdf5_built()) return;
  const InputData data = read_input(fixture("names.h5"));
  std::vector<std::string> names, paths;
  for (const auto& column : data.columns) {
    names.push_back(column.name);
    paths.push_back(column.path);
  }
  CHECK(paths == std::vector<std::string>{"/1st Value", "/a/b", "/a_b"});
  // The user's names as written; only the group separator '/' is no legal name character.
  CHECK(names == std::vector<std::string>{"1st Value", "a_b", "a_b_2"});
  std::vector<std::int32_t> values(3);
  read_rows_as(column_at(data, "/a_b"), 0, 3, DType::i32,
               std::as_writable_bytes(std::span(values)));
  CHECK(values == std::vector<std::int32_t>{10, 11, 12});
}

TEST_CASE("chunked, compressed and big-endian datasets read any row range exactly") {
  if (!hdf5_built()) return;
  const InputData data = read_input(fixture("chunked.h5"));
  const auto& vectors = column_at(data, "/data/vectors");
  CHECK(vectors.name == "data_vectors");
  CHECK(vectors.dtype == DType::f32);
  CHECK(vectors.row_shape == std::vector<std::uint64_t>{16});
  CHECK_FALSE(vectors.direct_rows);  // compressed: only libhdf5 can read it
  const auto expected = npy_bytes(fixture("vectors.npy"));
  const std::size_t row_bytes = 16 * 4;
  // Ranges that start and end inside chunks of 64 rows, and one row at the very end.
  for (auto [first, count] :
       {std::pair<std::uint64_t, std::uint64_t>{0, 37}, {37, 500}, {537, 463}, {999, 1}, {63, 2}}) {
    INFO("rows " << first << " + " << count);
    const auto rows = rows_of(vectors, first, count);
    CHECK(std::equal(rows.begin(), rows.end(), expected.begin() + first * row_bytes));
  }
  CHECK(rows_of(column_at(data, "/data/labels"), 0, 1000) == npy_bytes(fixture("labels.npy")));
  // Stored big-endian; read as little-endian values.
  const auto& big_endian = column_at(data, "/data/big_endian");
  CHECK(big_endian.dtype == DType::f64);
  CHECK_FALSE(big_endian.direct_rows);
  CHECK(rows_of(big_endian, 0, 1000) == npy_bytes(fixture("big_endian.npy")));
  // Rows read as f32 for the validator widen like any other f64 column.
  std::vector<float> widened(3);
  read_rows_as(big_endian, 10, 1, DType::f32, std::as_writable_bytes(std::span(widened)));
  CHECK(widened == std::vector<float>{10.0f, 5.0f, -10.0f});
}

TEST_CASE("the ann-benchmarks layout maps /train as the embedding; --field picks the others") {
  if (!hdf5_built()) return;
  const InputData data = read_input(fixture("ann.h5"));
  CHECK(data.columns.size() == 4);
  REQUIRE(data.default_fields.size() == 1);
  CHECK(data.default_fields[0].column == "embedding");
  CHECK(data.default_fields[0].path == "/train");

  const SourceMapping mapping = map_input(data, "ann.h5");
  CHECK(mapping.kind == SourceKind::embeddings);
  CHECK(mapping.rows == 40);
  REQUIRE(mapping.columns.size() == 1);
  CHECK(mapping.columns[0].name == "embedding");
  CHECK(mapping.columns[0].role == ColumnRole::embedding);
  CHECK(mapping.explanation.find("ann-benchmarks") != std::string::npos);
  CHECK(rows_of(mapping.columns[0], 0, 40) == npy_bytes(fixture("train.npy")));

  const SourceMapping queries = map_input(data, "ann.h5", std::nullopt,
                                          {{"embedding", "/test", ""},
                                           {"neighbors", "neighbors", ""},
                                           {"distances", "/distances", ""}});
  CHECK(queries.rows == 6);
  REQUIRE(queries.columns.size() == 3);
  CHECK(queries.columns[1].dtype == DType::i32);
  CHECK(queries.columns[1].role == ColumnRole::tensor);
  CHECK(rows_of(queries.columns[1], 0, 6) == npy_bytes(fixture("neighbors.npy")));
  CHECK(rows_of(queries.columns[2], 0, 6) == npy_bytes(fixture("distances.npy")));

  // Without the layout's defaults (--kind tensors), the arrays' differing lengths are the error.
  CHECK_THROWS_WITH_AS(map_input(data, "ann.h5", SourceKind::tensors),
                       doctest::Contains("disagree on the number of rows"), Error);
}

TEST_CASE("a metadata check that does not finish in time is stopped and the file refused") {
  if (!hdf5_built()) return;
  // The child that reads the metadata first stops as a stuck one would (a test-only variable);
  // with a limit of 1 s the read is refused after about that, in one line naming the limit.
  const test_support::ScopedEnv limit("GPUCACHE_HDF5_CHECK_SECONDS", "1");
  const test_support::ScopedEnv stall("GPUCACHE_HDF5_CHECK_TEST_STALL", "1");
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(read_input(fixture("kinds.h5")),
                       doctest::Contains("libhdf5 did not finish reading the file's metadata in "
                                         "1 s and was stopped"),
                       Error);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
  const auto result = run_cli({"probe", fixture("kinds.h5")});
  CHECK(result.exit_code == 2);
  CHECK(result.err.find("GPUCACHE_HDF5_CHECK_SECONDS") != std::string::npos);
  CHECK(result.err.find('\n') == result.err.size() - 1);
}

TEST_CASE("the metadata check's limit is a whole number of seconds or an error") {
  if (!hdf5_built()) return;
  for (const char* bad : {"0", "-1", "1.5", "ten", "86401"}) {
    const test_support::ScopedEnv limit("GPUCACHE_HDF5_CHECK_SECONDS", bad);
    CHECK_THROWS_WITH_AS(read_input(fixture("kinds.h5")),
                         doctest::Contains("GPUCACHE_HDF5_CHECK_SECONDS"), Error);
  }
  const test_support::ScopedEnv limit("GPUCACHE_HDF5_CHECK_SECONDS", "5");
  CHECK(read_input(fixture("kinds.h5")).columns.size() > 0);
}

TEST_CASE("a filter libhdf5 lacks, or nothing readable, is one error line") {
  if (!hdf5_built()) return;
  const InputData lzf = read_input(fixture("lzf.h5"));
  const auto& vectors = column_at(lzf, "/vectors");
  std::vector<std::byte> out(4 * 4);
  try {
    read_rows_as(vectors, 0, 1, DType::f32, out);
    FAIL("read an lzf dataset");
  } catch (const Error& error) {
    const std::string what = error.what();
    CHECK(what.find("lzf") != std::string::npos);
    CHECK(what.find("cannot decode") != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
  }
  CHECK_THROWS_WITH_AS(read_input(fixture("nothing.h5")),
                       doctest::Contains("no numeric or string dataset gpucache can read (found "
                                         "/record (compound), /scalar (a scalar))"),
                       Error);
}

TEST_CASE("hostile files: not HDF5, truncated, or corrupted anywhere give gpucache::Error") {
  if (!hdf5_built()) return;
  test_support::ScratchDir scratch;
  test_support::write_bytes(scratch / "text.h5", {'n', 'o', 'p', 'e'});
  CHECK_THROWS_WITH_AS(read_input(scratch / "text.h5"), doctest::Contains("not an HDF5 file"),
                       Error);
  CHECK_THROWS_AS(read_input(scratch / "missing.h5"), Error);

  // Open and read everything; any outcome but success or gpucache::Error fails the test.
  auto read_everything = [](const std::string& path) {
    const InputData data = read_input(path);
    for (const auto& column : data.columns) {
      if (column.kind == ColumnKind::text) {
        for (std::uint64_t row = 0; row < column.rows; ++row) read_text(column, row);
      } else if (column.kind == ColumnKind::sequence) {
        for (std::uint64_t row = 0; row < column.rows; ++row) {
          std::vector<std::byte> values(column.row_length(row) * dtype_size(column.dtype));
          column.read_sequence(row, values);
        }
      } else if (column.rows > 0 && column.rows < (1u << 20) &&
                 column.row_elements() * dtype_size(column.dtype) < (1u << 16)) {
        rows_of(column, 0, column.rows);
      }
    }
  };
  std::size_t failures = 0, cases = 0;
  for (const char* name : {"ann.h5", "chunked.h5", "kinds.h5", "tokens.h5"}) {
    const auto original = test_support::read_bytes(fixture(name));
    const std::string path = scratch / "corrupt.h5";
    for (std::size_t length : {std::size_t{8}, std::size_t{96}, std::size_t{800},
                               original.size() / 2, original.size() - 1}) {
      test_support::write_bytes(path, {original.begin(), original.begin() + length});
      ++cases;
      try {
        read_everything(path);
      } catch (const Error&) {
        ++failures;
      }
    }
    // Every byte of the metadata at the start, then a stride through the rest.
    for (std::size_t offset = 0; offset < original.size(); offset += offset < 2048 ? 13 : 251) {
      auto bytes = original;
      bytes[offset] = static_cast<char>(bytes[offset] ^ 0x5a);
      test_support::write_bytes(path, bytes);
      ++cases;
      try {
        read_everything(path);
      } catch (const Error&) {
        ++failures;
      }
    }
  }
  MESSAGE(failures << " of " << cases << " corrupted files were refused with gpucache::Error");
  CHECK(failures > 0);
}

TEST_CASE("CLI: probe shows the datasets; an unknown extension is recognised by its signature") {
  if (!hdf5_built()) return;
  const auto probed = json_of(run_cli({"probe", fixture("ann.h5"), "--json"}));
  const std::string text = probed.dump();
  CHECK(text.find("/train") != std::string::npos);
  CHECK(text.find("/neighbors") != std::string::npos);
  CHECK(text.find("ann-benchmarks") != std::string::npos);

  const auto plain = run_cli({"probe", fixture("kinds.h5")});
  CHECK(plain.exit_code == 0);
  CHECK(plain.out.find("/images") != std::string::npos);

  test_support::ScratchDir scratch;
  fs::copy_file(fixture("ann.h5"), scratch / "vectors.data");
  CHECK(run_cli({"probe", scratch / "vectors.data"}).exit_code == 0);
}

TEST_CASE("CLI: pack from HDF5 gives the values packing the .npy twins gives") {
  if (!hdf5_built()) return;
  test_support::ScratchDir scratch;
  auto pack_and_export = [&](std::vector<std::string> arguments, const std::string& name) {
    arguments.insert(arguments.begin(), "pack");
    arguments.insert(arguments.end(), {"-o", scratch / name, "-q"});
    const auto packed = run_cli(arguments);
    INFO("stderr: " << packed.err);
    REQUIRE(packed.exit_code == 0);
    REQUIRE(
        run_cli({"export", scratch / name, "--to", "npy", scratch / (name + ".out")}).exit_code ==
        0);
    return scratch / (name + ".out");
  };
  const auto from_h5 = pack_and_export({fixture("ann.h5")}, "ann");
  const auto from_npy = pack_and_export({fixture("train.npy")}, "train");
  CHECK(exported_column(from_h5, "embedding") == exported_column(from_npy, "embedding"));
  CHECK(exported_column(from_h5, "embedding") == npy_bytes(fixture("train.npy")));

  const auto queries = pack_and_export({fixture("ann.h5"), "--field", "embedding=/test", "--field",
                                        "neighbors=/neighbors", "--field", "distances=/distances"},
                                       "queries");
  CHECK(exported_column(queries, "embedding") == npy_bytes(fixture("test.npy")));
  CHECK(exported_column(queries, "neighbors") == npy_bytes(fixture("neighbors.npy")));
  CHECK(exported_column(queries, "distances") == npy_bytes(fixture("distances.npy")));

  const auto chunked = pack_and_export({fixture("chunked.h5"), "--field", "embedding=/data/vectors",
                                        "--field", "labels=/data/labels"},
                                       "chunked");
  CHECK(exported_column(chunked, "embedding") == npy_bytes(fixture("vectors.npy")));
  CHECK(exported_column(chunked, "labels") == npy_bytes(fixture("labels.npy")));

  // Sequences pack too; export writes a sequence column as NAME.values.npy and NAME.offsets.npy.
  const auto packed_tokens = run_cli(
      {"pack", fixture("tokens.h5"), "--field", "tokens=/tokens", "-o", scratch / "tokens", "-q"});
  INFO("stderr: " << packed_tokens.err);
  CHECK(packed_tokens.exit_code == 0);
  const auto inspected = json_of(run_cli({"inspect", scratch / "tokens", "--json"}));
  CHECK(inspected.dump().find("sequence") != std::string::npos);

  const auto kinds = pack_and_export({fixture("kinds.h5"), "--field", "images=/images", "--field",
                                      "flags=/flags", "--field", "names=/names"},
                                     "kinds");
  CHECK(exported_column(kinds, "images") == npy_bytes(fixture("images.npy")));
  CHECK(exported_column(kinds, "flags") == npy_bytes(fixture("flags.npy")));
}

TEST_CASE("CLI: an unreadable dataset fails pack with one line and no HDF5 error stack") {
  if (!hdf5_built()) return;
  test_support::ScratchDir scratch;
  const auto result = run_cli({"pack", fixture("lzf.h5"), "-o", scratch / "ds"});
  CHECK(result.exit_code == 2);
  INFO("stderr: " << result.err);
  CHECK(result.err.find("lzf") != std::string::npos);
  CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  CHECK(result.err.find("HDF5-DIAG") == std::string::npos);
  CHECK_FALSE(fs::exists(scratch / "ds/manifest.json"));

  auto bytes = test_support::read_bytes(fixture("chunked.h5"));
  bytes.resize(bytes.size() / 2);
  test_support::write_bytes(scratch / "cut.h5", bytes);
  const auto cut = run_cli(
      {"pack", scratch / "cut.h5", "--field", "embedding=/data/vectors", "-o", scratch / "cut"});
  CHECK(cut.exit_code == 2);
  CHECK(std::count(cut.err.begin(), cut.err.end(), '\n') == 1);
  CHECK(cut.err.find("HDF5-DIAG") == std::string::npos);
}
