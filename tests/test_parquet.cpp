// The native Parquet reader on files pyarrow wrote (tests/data/parquet,
// scripts/fixtures/parquet_fixtures.py): every fixture's columns against the kind, dtype, row
// shape and values its NAME.expected.json and .npy twins record (codecs, dictionary pages and
// their PLAIN fallback, v2 pages, lists, nested fixed-size lists, every integer width), nulls and
// unsupported fields refused by name, hostile footers, and probe and pack through the real
// binary. In a build without libsnappy it checks the one-line refusal instead.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpucache/error.hpp"
#include "gpucache/input.hpp"
#include "gpucache/parquet.hpp"
#include "gpucache/schema.hpp"
#include "parquet_test_support.hpp"
#include "test_support.hpp"

using namespace gpucache;
using parquet_test::parquet_built;
using test_support::data_path;
using test_support::run_cli;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

std::string fixture(const std::string& name) {
  return data_path("parquet/" + name);
}

Json expected_of(const std::string& name) {
  return parquet_test::expected_json(fixture(name + ".expected.json"));
}

const InputColumn* find_column(const InputData& data, const std::string& path) {
  for (const auto& column : data.columns)
    if (column.path == path) return &column;
  return nullptr;
}

std::vector<std::byte> rows_of(const InputColumn& column, std::uint64_t first,
                               std::uint64_t count) {
  std::vector<std::byte> out(count * column.row_elements() * dtype_size(column.dtype));
  read_rows_as(column, first, count, column.dtype, out);
  return out;
}

std::vector<std::byte> npy_bytes(const std::string& path) {
  const InputData data = read_input(path);
  const SourceMapping mapping = map_input(data, path, SourceKind::tensors);
  REQUIRE(mapping.columns.size() == 1);
  return rows_of(mapping.columns.front(), 0, mapping.rows);
}

template <class T>
std::vector<T> sequence_row(const InputColumn& column, std::uint64_t row) {
  std::vector<T> values(column.row_length(row));
  column.read_sequence(row, std::as_writable_bytes(std::span(values)));
  return values;
}

// Every column of a fixture against its expected.json: description, then values.
void check_fixture(const std::string& name) {
  INFO("fixture " << name);
  const Json expected = expected_of(name);
  const InputData data = read_input(fixture(name + ".parquet"));
  REQUIRE(data.columnar());
  for (const auto& want : expected["columns"]) {
    const std::string path = want["name"];
    INFO("column " << path);
    const InputColumn* column = find_column(data, path);
    if (want["gpucache"].is_null()) {
      CHECK(column == nullptr);
      continue;
    }
    REQUIRE(column != nullptr);
    CHECK(column->rows == expected["rows"].get<std::uint64_t>());
    CHECK(column_kind_name(column->kind) == want["gpucache"]["kind"].get<std::string>());
    CHECK(dtype_name(column->dtype) == want["gpucache"]["dtype"].get<std::string>());
    if (column->kind == ColumnKind::tensor)
      CHECK(column->row_shape == want["gpucache"]["row_shape"].get<std::vector<std::uint64_t>>());
    // Dates and times: the time type as the manifest will record it.
    CHECK(column->time.has_value() == want["gpucache"].contains("time"));
    if (column->time && want["gpucache"].contains("time"))
      CHECK(describe_time(*column->time) ==
            want["gpucache"]["time"]["kind"].get<std::string>() + "[" +
                want["gpucache"]["time"]["unit"].get<std::string>() + "]");
    if (want.contains("npy") && !want["npy"].is_null()) {
      CHECK(rows_of(*column, 0, column->rows) == npy_bytes(fixture(want["npy"])));
      if (column->rows > 2) {  // a range that starts and ends inside row groups
        const auto all = rows_of(*column, 0, column->rows);
        const std::uint64_t row_bytes = all.size() / column->rows;
        const auto middle = rows_of(*column, 1, column->rows - 2);
        CHECK(std::equal(middle.begin(), middle.end(), all.begin() + row_bytes));
      }
    }
    if (!want.contains("values")) continue;
    const Json& values = want["values"];
    REQUIRE(values.size() == column->rows);
    for (std::uint64_t row = 0; row < column->rows; ++row) {
      INFO("row " << row);
      if (column->kind == ColumnKind::text) {
        CHECK(read_text(*column, row) == values[row].get<std::string>());
      } else if (column->kind == ColumnKind::sequence && column->dtype == DType::i32) {
        CHECK(sequence_row<std::int32_t>(*column, row) ==
              values[row].get<std::vector<std::int32_t>>());
      } else if (column->kind == ColumnKind::sequence && column->dtype == DType::f64) {
        CHECK(sequence_row<double>(*column, row) == values[row].get<std::vector<double>>());
      }
    }
  }
}

std::string error_of(const std::string& name) {
  try {
    read_input(fixture(name));
  } catch (const Error& error) {
    return error.what();
  }
  FAIL("no error reading " << name);
  return {};
}

}  // namespace

TEST_CASE(
    "a build without libsnappy refuses .parquet inputs with one line saying how to build it") {
  if (parquet_built()) return;
  const auto result = run_cli({"probe", fixture("plain.parquet")});
  CHECK(result.exit_code == 2);
  CHECK(result.err.find("parquet input was not built into this gpucache") != std::string::npos);
}

TEST_CASE(
    "every codec, dictionary pages with their PLAIN fallback and v2 pages read the same values") {
  if (!parquet_built()) return;
  for (const char* name : {"plain", "dictionary", "snappy", "gzip", "zstd", "uncompressed",
                           "page_v2", "big_rowgroups", "pack_twin"})
    check_fixture(name);
}

TEST_CASE("LZ4_RAW pages read when liblz4 was found, else are refused naming the codec") {
  if (!parquet_built()) return;
  try {
    check_fixture("lz4");
  } catch (const Error& error) {
    CHECK(std::string(error.what()).find("LZ4_RAW") != std::string::npos);
    CHECK(std::string(error.what()).find("liblz4") != std::string::npos);
  }
}

TEST_CASE(
    "lists: one length makes a tensor, varying lengths a sequence, nesting a tensor of rank 2") {
  if (!parquet_built()) return;
  check_fixture("lists");
  check_fixture("nested");
  check_fixture("types");
}

TEST_CASE("fields gpucache cannot store are left out; the others read") {
  if (!parquet_built()) return;
  check_fixture("unsupported");
  const InputData data = read_input(fixture("unsupported.parquet"));
  // ok, amount (decimal as f64), blob (binary as a u8 sequence), point.x and point.y (a struct,
  // flattened), when (a timestamp: an i64 column with its time, tests/test_time_columns.cpp);
  // the map is left out with its reason.
  CHECK(data.columns.size() == 6);
  for (const char* path : {"ok", "amount", "blob", "point.x", "point.y", "when"})
    CHECK_MESSAGE(find_column(data, path) != nullptr, path);
  REQUIRE(data.left_out.size() == 1);
  CHECK(data.left_out[0] == LeftOutField{"tags", "a map"});
  // amount is decimal128(10, 2) of i * 1.25: f64, the conversion named.
  const InputColumn* amount = find_column(data, "amount");
  CHECK(amount->conversion == "decimal(10,2) stored as f64");
  std::vector<double> amounts(10);
  read_rows_as(*amount, 0, 10, DType::f64, std::as_writable_bytes(std::span(amounts)));
  for (int i = 0; i < 10; ++i) CHECK(amounts[i] == i * 1.25);
  // blob is bytes(range(i)): row i holds i bytes 0, 1, ...
  const InputColumn* blob = find_column(data, "blob");
  for (std::uint64_t row = 0; row < 10; ++row) {
    std::vector<std::uint8_t> expected(row);
    for (std::uint64_t k = 0; k < row; ++k) expected[k] = static_cast<std::uint8_t>(k);
    CHECK(sequence_row<std::uint8_t>(*blob, row) == expected);
  }
  // Probe lists them; --field naming one says why it is not there.
  const auto probe = run_cli({"probe", fixture("unsupported.parquet")});
  CHECK(probe.out.find("left out: tags (") != std::string::npos);
  test_support::ScratchDir scratch;
  const auto packed =
      run_cli({"pack", fixture("unsupported.parquet"), "--field", "t=tags", "-o", scratch / "ds"});
  CHECK(packed.exit_code == 2);
  CHECK(packed.err.find("left out: tags (") != std::string::npos);
}

TEST_CASE("nulls: each column lists its null rows and holds placeholders there") {
  if (!parquet_built()) return;
  const Json expected = expected_of("nulls");
  const InputData data = read_input(fixture("nulls.parquet"));
  for (const auto& want : expected["columns"]) {
    const std::string name = want["name"];
    INFO("column " << name);
    const InputColumn* column = find_column(data, name);
    if (want["gpucache"].is_null()) {
      // A null inside a list: the field is left out, with the reason, not the whole file.
      CHECK(column == nullptr);
      const LeftOutField left_out{name, want["left_out"].get<std::string>()};
      CHECK(std::find(data.left_out.begin(), data.left_out.end(), left_out) != data.left_out.end());
      continue;
    }
    REQUIRE(column != nullptr);
    CHECK(column->null_rows == want["null_rows"].get<std::vector<std::uint64_t>>());
    CHECK(column_kind_name(column->kind) == want["gpucache"]["kind"].get<std::string>());
    const Json& values = want["values"];
    REQUIRE(column->rows == values.size());
    for (std::uint64_t row = 0; row < column->rows; ++row) {
      INFO("row " << row);
      if (column->kind == ColumnKind::text) {
        CHECK(read_text(*column, row) ==
              (values[row].is_null() ? std::string() : values[row].get<std::string>()));
        continue;
      }
      const auto bytes = rows_of(*column, row, 1);
      if (column->dtype == DType::i64) {
        std::int64_t value;
        std::memcpy(&value, bytes.data(), 8);
        CHECK(value == (values[row].is_null() ? 0 : values[row].get<std::int64_t>()));
      } else {
        std::vector<float> got(column->row_elements());
        std::memcpy(got.data(), bytes.data(), bytes.size());
        const std::vector<float> want_row = values[row].is_null()
                                                ? std::vector<float>(got.size(), 0.0f)
                                                : values[row].get<std::vector<float>>();
        CHECK(got == want_row);
      }
    }
  }
}

TEST_CASE("with several bad chunks the error is the first in file order, whatever the threads") {
  if (!parquet_built()) return;
  // invalid_utf8.parquet (parquet_writers_fixtures.py): column a's row group 1 and column b's
  // row group 0 hold invalid UTF-8; row group 0 comes first in the file.
  const std::string file = data_path("parquet_writers/invalid_utf8.parquet");
  for (int attempt = 0; attempt < 20; ++attempt) {
    try {
      read_parquet(file, {.threads = 8});
      FAIL("read");
    } catch (const Error& error) {
      CHECK(std::string(error.what()).find("column 'b' row group 0: row 2 is not valid UTF-8") !=
            std::string::npos);
    }
  }
}

TEST_CASE("DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, BYTE_STREAM_SPLIT and BROTLI read") {
  if (!parquet_built()) return;
  check_fixture("delta");
  try {
    check_fixture("brotli");
  } catch (const Error& error) {
    // A build without libbrotli refuses BROTLI pages by name, saying what to install.
    CHECK(std::string(error.what())
              .find("BROTLI, which gpucache cannot read (this gpucache was "
                    "built without libbrotli") != std::string::npos);
  }
}

TEST_CASE(
    "files that are not Parquet, truncated, or with a footer past the file fail in one line") {
  if (!parquet_built()) return;
  CHECK(error_of("not_parquet.parquet").find("not a Parquet file") != std::string::npos);
  CHECK(error_of("truncated.parquet").find("truncated") != std::string::npos);
  CHECK(error_of("bad_footer.parquet").find("footer claims") != std::string::npos);
  // Every prefix of a real file, and every single-byte change to its footer, fails cleanly or
  // reads; none crashes (the sanitizer build runs this too).
  std::ifstream in(fixture("dictionary.parquet"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  test_support::ScratchDir scratch;
  const std::string path = scratch / "cut.parquet";
  auto attempt = [&](const std::string& content) {
    std::ofstream(path, std::ios::binary)
        .write(content.data(), static_cast<std::streamsize>(content.size()));
    try {
      const InputData data = read_input(path);
      for (const auto& column : data.columns)
        if (column.kind == ColumnKind::tensor) rows_of(column, 0, column.rows);
    } catch (const Error&) {
    }
  };
  for (std::size_t length = 0; length < bytes.size(); length += 97)
    attempt(bytes.substr(0, length));
  std::uint32_t footer = 0;
  std::memcpy(&footer, bytes.data() + bytes.size() - 8, 4);
  for (std::size_t at = bytes.size() - 8 - footer; at < bytes.size() - 8; ++at)
    for (unsigned char flip : {0x01, 0x80, 0xff}) {
      std::string changed = bytes;
      changed[at] = static_cast<char>(changed[at] ^ flip);
      attempt(changed);
    }
}

TEST_CASE("an empty file has columns without rows") {
  if (!parquet_built()) return;
  const InputData data = read_input(fixture("empty.parquet"));
  REQUIRE(data.columns.size() == 2);
  for (const auto& column : data.columns) CHECK(column.rows == 0);
}

TEST_CASE("decoding on one thread and on several gives the same columns") {
  if (!parquet_built()) return;
  const InputData one = read_parquet(fixture("big_rowgroups.parquet"), {.threads = 1});
  const InputData four = read_parquet(fixture("big_rowgroups.parquet"), {.threads = 4});
  REQUIRE(one.columns.size() == four.columns.size());
  for (std::size_t c = 0; c < one.columns.size(); ++c)
    CHECK(rows_of(one.columns[c], 0, one.columns[c].rows) ==
          rows_of(four.columns[c], 0, four.columns[c].rows));
  // The embedding has no twin (it would be 192 KB): its formula, ((i*16+j) % 97)*0.125 - 5.0.
  const InputColumn& embedding = *find_column(one, "embedding");
  const auto all = rows_of(embedding, 0, embedding.rows);
  REQUIRE(all.size() == 3000 * 16 * 4);
  for (std::size_t k = 0; k < 3000 * 16; ++k) {
    float value;
    std::memcpy(&value, all.data() + k * 4, 4);
    if (value != static_cast<float>((k % 97) * 0.125 - 5.0)) FAIL("value " << k << " is " << value);
  }
  // Rows lie in one buffer per row group: direct within one, pointers across them.
  CHECK(embedding.direct_rows(0, 1000) != nullptr);
  CHECK(embedding.direct_rows(999, 2) == nullptr);
  std::vector<const std::byte*> pointers(3);
  REQUIRE(embedding.row_pointers(999, 3, pointers.data()));
  const auto rows = rows_of(embedding, 999, 3);
  for (std::size_t r = 0; r < 3; ++r)
    CHECK(std::memcmp(pointers[r], rows.data() + r * 64, 64) == 0);
}

TEST_CASE("CLI: probe lists a Parquet file's columns; pack gives the values of the .npy twins") {
  if (!parquet_built()) return;
  const auto probe = run_cli({"probe", fixture("pack_twin.parquet"), "--json"});
  REQUIRE(probe.exit_code == 0);
  Json probed = Json::parse(probe.out);
  if (probed.is_array()) probed = probed[0];
  const Json arrays = probed["arrays"];
  REQUIRE(arrays.size() == 2);
  CHECK(arrays[0]["path"] == "embedding");
  CHECK(arrays[0]["shape"] == Json::array({200, 16}));

  test_support::ScratchDir scratch;
  const auto packed = run_cli({"pack", fixture("pack_twin.parquet"), "-o", scratch / "ds", "-q"});
  INFO("stderr: " << packed.err);
  REQUIRE(packed.exit_code == 0);
  REQUIRE(run_cli({"export", scratch / "ds", "--to", "npy", scratch / "out"}).exit_code == 0);
  CHECK(npy_bytes(scratch / "out/embedding.npy") == npy_bytes(fixture("pack_twin.embedding.npy")));
  CHECK(npy_bytes(scratch / "out/label.npy") == npy_bytes(fixture("pack_twin.label.npy")));

  // Nulls: the rows dropped with the reason null, listed in --rejects, counted per column.
  const auto dropped = run_cli({"pack", fixture("nulls.parquet"), "-o", scratch / "nulls",
                                "--rejects", scratch / "rejects.jsonl", "--json", "-q"});
  INFO("stderr: " << dropped.err);
  REQUIRE(dropped.exit_code == 0);
  CHECK(Json::parse(dropped.out)["dropped"]["null"] == 3);
  CHECK(Json::parse(dropped.out)["rows"] == 7);
  std::ifstream rejects(scratch / "rejects.jsonl");
  std::vector<std::pair<std::uint64_t, std::string>> lines;
  for (std::string line; std::getline(rejects, line);) {
    const Json reject = Json::parse(line);
    CHECK(reject["reason"] == "null");
    lines.emplace_back(reject["row"].get<std::uint64_t>(), reject["column"].get<std::string>());
  }
  CHECK(lines == std::vector<std::pair<std::uint64_t, std::string>>{
                     {3, "label"}, {5, "name"}, {7, "embedding"}});
  const auto inspected = run_cli({"inspect", scratch / "nulls"});
  CHECK(inspected.out.find("3 null") != std::string::npos);
  CHECK(inspected.out.find("rows with a null, per column: embedding 1, label 1, name 1") !=
        std::string::npos);
  REQUIRE(run_cli({"export", scratch / "nulls", "--to", "npy", scratch / "nulls_out"}).exit_code ==
          0);
  // A column that is not packed does not matter: --field label keeps every row but row 3.
  const auto one = run_cli({"pack", fixture("nulls.parquet"), "--field", "label=label", "-o",
                            scratch / "label", "--json", "-q"});
  INFO("stderr: " << one.err);
  REQUIRE(one.exit_code == 0);
  CHECK(Json::parse(one.out)["rows"] == 9);
  // --on-null error refuses, naming the input, the column and the row.
  const auto refused =
      run_cli({"pack", fixture("nulls.parquet"), "--on-null", "error", "-o", scratch / "refused"});
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("nulls.parquet") != std::string::npos);
  CHECK(refused.err.find("column 'label' row 3") != std::string::npos);
  CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(scratch / "refused"));
  CHECK(run_cli({"pack", fixture("nulls.parquet"), "--on-null", "keep", "-o", scratch / "k"})
            .exit_code == 2);
}
