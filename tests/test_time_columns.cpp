// Dates and times (issue 27 item 6, issue 28 item 3): timestamps, dates, times of day, durations
// and INT96 timestamps written by pyarrow, pandas, DuckDB and polars, and numpy's datetime64 /
// timedelta64 in .npy and .npz (scripts/fixtures/time_fixtures.py), become i64 columns with their
// kind, unit and time zone; pack records them in manifest.json, probe and pack's report show them,
// export writes numpy datetime64/timedelta64, --append compares them, and a null timestamp (or NaT)
// drops its row with the reason null.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "gpucache/error.hpp"
#include "gpucache/input.hpp"
#include "gpucache/schema.hpp"
#include "gpucache/shard/manifest.hpp"
#include "parquet/parquet_time.hpp"
#include "parquet_test_support.hpp"
#include "test_support.hpp"

using namespace gpucache;
using parquet_test::parquet_built;
using test_support::data_path;
using test_support::run_cli;
using test_support::ScratchDir;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

std::string fixture(const std::string& name) {
  return data_path("time/" + name);
}

Json expected_of(const std::string& name) {
  return parquet_test::expected_json(fixture(name + ".expected.json"));
}

std::optional<ColumnTime> time_of(const Json& expected) {
  if (expected.is_null()) return std::nullopt;
  ColumnTime time;
  time.kind = *parse_time_kind(expected["kind"].get<std::string>());
  time.unit = *parse_time_unit(expected["unit"].get<std::string>());
  if (!expected["tz"].is_null()) time.tz = expected["tz"].get<std::string>();
  return time;
}

std::vector<std::int64_t> i64_rows(const InputColumn& column) {
  REQUIRE(column.dtype == DType::i64);
  std::vector<std::int64_t> values(column.rows);
  column.read_rows(0, column.rows, std::as_writable_bytes(std::span(values)));
  return values;
}

// Every column of a fixture with a time type: i64, that type, the values pyarrow or numpy reads,
// its nulls listed in null_rows. A Parquet null reads as the placeholder 0; numpy's NaT keeps its
// own value (INT64_MIN) in the array, which pack never stores (the row is dropped).
void check_columns(const std::vector<InputColumn>& columns, const Json& expected,
                   std::int64_t null_value = 0) {
  for (const auto& entry : expected["columns"]) {
    const auto name = entry["name"].get<std::string>();
    CAPTURE(name);
    const auto found = std::find_if(columns.begin(), columns.end(),
                                    [&](const InputColumn& c) { return c.path == name; });
    REQUIRE(found != columns.end());
    const auto time = time_of(entry["time"]);
    CHECK(found->time == time);
    if (!time) continue;
    CHECK(found->kind == ColumnKind::tensor);
    CHECK(found->row_shape.empty());
    const auto values = i64_rows(*found);
    REQUIRE(values.size() == entry["values"].size());
    for (std::size_t r = 0; r < values.size(); ++r) {
      CAPTURE(r);
      if (entry["values"][r].is_null())
        CHECK(values[r] == null_value);
      else
        CHECK(values[r] == entry["values"][r].get<std::int64_t>());
    }
    CHECK(found->null_rows == entry["null_rows"].get<std::vector<std::uint64_t>>());
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A .npy written by export: its header's descr and its int64 values.
std::pair<std::string, std::vector<std::int64_t>> read_npy_i64(const std::string& path) {
  const std::string bytes = read_text(path);
  REQUIRE(bytes.size() >= 10);
  const std::size_t header = static_cast<unsigned char>(bytes[8]) |
                             (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  const std::string dict = bytes.substr(10, header);
  const auto at = dict.find("'descr': '");
  REQUIRE(at != std::string::npos);
  const std::string descr = dict.substr(at + 10, dict.find('\'', at + 10) - at - 10);
  std::vector<std::int64_t> values((bytes.size() - 10 - header) / 8);
  std::memcpy(values.data(), bytes.data() + 10 + header, values.size() * 8);
  return {descr, values};
}

}  // namespace

TEST_CASE("time types: the names of kinds and units round-trip, and invalid combinations fail") {
  for (auto kind : {TimeKind::timestamp, TimeKind::date, TimeKind::time, TimeKind::duration})
    CHECK(parse_time_kind(time_kind_name(kind)) == kind);
  for (auto unit : {TimeUnit::s, TimeUnit::ms, TimeUnit::us, TimeUnit::ns, TimeUnit::D})
    CHECK(parse_time_unit(time_unit_name(unit)) == unit);
  CHECK_FALSE(parse_time_kind("datetime"));
  CHECK_FALSE(parse_time_unit("h"));
  CHECK(time_is_valid({TimeKind::timestamp, TimeUnit::us, "UTC"}));
  CHECK(time_is_valid({TimeKind::date, TimeUnit::D, ""}));
  CHECK(time_is_valid({TimeKind::date, TimeUnit::ms, ""}));  // Arrow's date64
  CHECK_FALSE(time_is_valid({TimeKind::duration, TimeUnit::D, ""}));
  CHECK_FALSE(time_is_valid({TimeKind::time, TimeUnit::us, "UTC"}));
  CHECK(describe_time({TimeKind::timestamp, TimeUnit::us, "UTC"}) == "timestamp[us, UTC]");
  CHECK(describe_time({TimeKind::date, TimeUnit::D, ""}) == "date[D]");
}

TEST_CASE("Parquet time types: the legacy ConvertedTypes and the annotations that do not fit") {
  using namespace gpucache::detail::parquet;
  auto leaf = [](PhysicalType type, std::optional<Converted> converted,
                 Logical logical = Logical::none, TimeUnitCode unit = TimeUnitCode::none,
                 bool utc = false) {
    SchemaElement element;
    element.type = type;
    element.converted = converted;
    element.logical = logical;
    element.time_unit = unit;
    element.time_adjusted_to_utc = utc;
    return element;
  };
  using P = PhysicalType;
  // Written before LogicalType existed: their timestamps are instants (UTC).
  auto millis = time_leaf(leaf(P::int64, Converted::timestamp_millis));
  REQUIRE(millis);
  CHECK(millis->refusal.empty());
  CHECK(millis->time == ColumnTime{TimeKind::timestamp, TimeUnit::ms, "UTC"});
  CHECK(time_leaf(leaf(P::int64, Converted::timestamp_micros))->time ==
        ColumnTime{TimeKind::timestamp, TimeUnit::us, "UTC"});
  auto date = time_leaf(leaf(P::int32, Converted::date));
  CHECK(date->time == ColumnTime{TimeKind::date, TimeUnit::D, ""});
  CHECK(date->conversion == TimeConversion::widen_int32);
  CHECK(time_leaf(leaf(P::int32, Converted::time_millis))->time ==
        ColumnTime{TimeKind::time, TimeUnit::ms, ""});
  CHECK(time_leaf(leaf(P::int64, Converted::time_micros))->time ==
        ColumnTime{TimeKind::time, TimeUnit::us, ""});
  // The LogicalType decides over the ConvertedType beside it.
  CHECK(time_leaf(leaf(P::int64, Converted::timestamp_millis, Logical::timestamp,
                       TimeUnitCode::nanos, false))
            ->time == ColumnTime{TimeKind::timestamp, TimeUnit::ns, ""});
  // Annotations on the wrong physical type, or without a unit, leave the field out.
  CHECK_FALSE(time_leaf(leaf(P::int32, Converted::timestamp_millis))->refusal.empty());
  CHECK_FALSE(time_leaf(leaf(P::int64, Converted::date))->refusal.empty());
  CHECK_FALSE(time_leaf(leaf(P::int64, std::nullopt, Logical::timestamp, TimeUnitCode::none))
                  ->refusal.empty());
  CHECK_FALSE(time_leaf(leaf(P::int32, std::nullopt, Logical::time, TimeUnitCode::micros))
                  ->refusal.empty());
  // Plain integers are not times.
  CHECK_FALSE(time_leaf(leaf(P::int64, std::nullopt)));
  CHECK_FALSE(time_leaf(leaf(P::int32, Converted::int_16)));
}

TEST_CASE("INT96 timestamps convert as Arrow converts them: (julian day - 2440588) days + nanos") {
  using namespace gpucache::detail::parquet;
  auto int96 = [](std::uint64_t nanos, std::uint32_t julian) {
    std::array<std::byte, 12> bytes;
    std::memcpy(bytes.data(), &nanos, 8);
    std::memcpy(bytes.data() + 8, &julian, 4);
    return bytes;
  };
  auto convert = [](const std::array<std::byte, 12>& in) {
    std::int64_t out = 0;
    convert_time_values(TimeConversion::int96_nanos, in.data(), 1,
                        reinterpret_cast<std::byte*>(&out));
    return out;
  };
  CHECK(convert(int96(0, 2440588)) == 0);
  CHECK(convert(int96(1, 2440588)) == 1);
  CHECK(convert(int96(86'399'999'999'999, 2440587)) == -1);
  CHECK(convert(int96(5, 2440589)) == 86'400'000'000'005);
  // A day far outside int64 nanoseconds wraps (as Arrow's arithmetic does) instead of trapping.
  CHECK_NOTHROW(convert(int96(0, 0xffffffffu)));
}

TEST_CASE(
    "Parquet dates and times of pyarrow, pandas, DuckDB and polars read as pyarrow reads them") {
  if (!parquet_built()) return;
  for (const char* name : {"pyarrow_times", "pyarrow_int96", "pyarrow_int96_dict", "pandas_tz",
                           "duckdb_times", "polars_times"}) {
    CAPTURE(name);
    const auto data = read_input(fixture(std::string(name) + ".parquet"));
    CHECK(data.left_out.empty());
    check_columns(data.columns, expected_of(name));
  }
}

TEST_CASE("numpy datetime64 and timedelta64 in .npy and .npz become time columns, NaT a null") {
  {
    const auto data = read_input(fixture("numpy_times.npy"));
    const auto mapping = map_input(data, fixture("numpy_times.npy"));
    const auto expected = expected_of("numpy_times");
    REQUIRE(mapping.columns.size() == 1);
    auto column = mapping.columns[0];
    column.path = "numpy_times";
    check_columns({column}, expected, std::numeric_limits<std::int64_t>::min());
  }
  {
    const auto data = read_input(fixture("numpy_times.npz"));
    const auto mapping = map_input(data, fixture("numpy_times.npz"));
    check_columns(mapping.columns, expected_of("numpy_times_npz"),
                  std::numeric_limits<std::int64_t>::min());
  }
}

TEST_CASE("pack records time columns in the manifest and its report; export writes datetime64") {
  if (!parquet_built()) return;
  ScratchDir scratch;
  const std::string out = scratch / "ds";
  const auto packed = run_cli({"pack", fixture("pyarrow_times.parquet"), "-o", out, "--json"});
  REQUIRE_MESSAGE(packed.exit_code == 0, packed.err);
  const auto report = Json::parse(packed.out);
  const auto expected = expected_of("pyarrow_times");
  // ts_ns_utc is null at row 2: that row is dropped with the reason null.
  CHECK(report["rows"] == 5);
  CHECK(report["dropped"]["null"] == 1);
  std::map<std::string, Json> reported;
  for (const auto& entry : report["times"]) reported[entry["column"]] = entry;
  const auto manifest = Json::parse(read_text(out + "/manifest.json"));
  std::map<std::string, Json> recorded;
  for (const auto& column : manifest["columns"])
    if (column.contains("time")) recorded[column["name"]] = column;
  for (const auto& entry : expected["columns"]) {
    const auto name = entry["name"].get<std::string>();
    CAPTURE(name);
    if (entry["time"].is_null()) {
      CHECK_FALSE(recorded.count(name));
      CHECK_FALSE(reported.count(name));
      continue;
    }
    REQUIRE(recorded.count(name));
    CHECK(recorded[name]["dtype"] == "i64");
    CHECK(recorded[name]["time"] == entry["time"]);
    CHECK(reported[name]["kind"] == entry["time"]["kind"]);
    CHECK(reported[name]["unit"] == entry["time"]["unit"]);
    CHECK(reported[name]["tz"] == entry["time"]["tz"]);
  }
  // The manifest reads back through the one parser, times and all.
  bool hash_ok = false;
  const auto parsed = shard::read_manifest(out + "/manifest.json", hash_ok);
  CHECK(hash_ok);
  REQUIRE(parsed.times.size() == parsed.columns.size());
  CHECK(parsed.times[0] == ColumnTime{TimeKind::timestamp, TimeUnit::ms, "UTC"});

  // inspect shows it beside the column, and in --json as the manifest has it.
  const auto inspected = run_cli({"inspect", out});
  CHECK(inspected.out.find("timestamp[ms, UTC], tensor") != std::string::npos);
  const auto inspected_json = Json::parse(run_cli({"inspect", out, "--json"}).out);
  CHECK(inspected_json["columns"][3]["time"] ==
        Json{{"kind", "date"}, {"unit", "D"}, {"tz", nullptr}});

  const auto text = run_cli({"pack", fixture("pyarrow_times.parquet"), "-o", scratch / "t"});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("column 'ts_ms_utc': timestamp[ms, UTC], stored as i64") !=
        std::string::npos);

  const std::string exported = scratch / "npy";
  const auto exporting = run_cli({"export", out, exported, "--to", "npy"});
  REQUIRE_MESSAGE(exporting.exit_code == 0, exporting.err);
  const std::map<std::string, std::string> descrs = {
      {"ts_ms_utc", "<M8[ms]"}, {"ts_us", "<M8[us]"}, {"ts_ns_utc", "<M8[ns]"},
      {"d32", "<M8[D]"},        {"d64", "<M8[D]"},    {"t_ms", "<m8[ms]"},
      {"t_us", "<m8[us]"},      {"t_ns", "<m8[ns]"},  {"dur", "<i8"}};
  for (const auto& entry : expected["columns"]) {
    const auto name = entry["name"].get<std::string>();
    if (!descrs.count(name)) continue;
    CAPTURE(name);
    const auto [descr, values] = read_npy_i64(exported + "/" + name + ".npy");
    CHECK(descr == descrs.at(name));
    std::vector<std::int64_t> kept;
    for (std::size_t r = 0; r < entry["values"].size(); ++r)
      if (r != 2) kept.push_back(entry["values"][r].get<std::int64_t>());
    CHECK(values == kept);
  }
}

TEST_CASE("probe shows a time column's type; --on-null error refuses a null timestamp") {
  if (!parquet_built()) return;
  const auto probed = run_cli({"probe", fixture("duckdb_times.parquet")});
  REQUIRE_MESSAGE(probed.exit_code == 0, probed.err);
  CHECK(probed.out.find("timestamp[us, UTC]") != std::string::npos);
  CHECK(probed.out.find("date[D]") != std::string::npos);
  CHECK(probed.out.find("time[us]") != std::string::npos);
  const auto json = run_cli({"probe", fixture("duckdb_times.parquet"), "--json"});
  REQUIRE(json.exit_code == 0);
  CHECK(json.out.find("\"kind\": \"timestamp\"") != std::string::npos);

  ScratchDir scratch;
  const auto refused = run_cli(
      {"pack", fixture("duckdb_times.parquet"), "-o", scratch / "ds", "--on-null", "error"});
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("ts") != std::string::npos);
  CHECK_FALSE(fs::exists(scratch / "ds/manifest.json"));
}

TEST_CASE("--append refuses another unit or zone, naming the column; the same type appends") {
  if (!parquet_built()) return;
  ScratchDir scratch;
  const std::string out = scratch / "ds";
  REQUIRE(run_cli({"pack", fixture("when_us.parquet"), "-o", out}).exit_code == 0);
  const auto refused = run_cli({"pack", fixture("when_ns.parquet"), "--append", out});
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("'when'") != std::string::npos);
  CHECK(refused.err.find("timestamp[ns, UTC]") != std::string::npos);
  CHECK(refused.err.find("timestamp[us, UTC]") != std::string::npos);
  const auto appended = run_cli({"pack", fixture("when_us.parquet"), "--append", out});
  CHECK_MESSAGE(appended.exit_code == 0, appended.err);
  const auto manifest = Json::parse(read_text(out + "/manifest.json"));
  CHECK(manifest["rows"] == 4);
  CHECK(manifest["columns"][0]["time"]["unit"] == "us");

  // Two inputs of one pack that disagree are refused the same way.
  const auto mixed = run_cli(
      {"pack", fixture("when_us.parquet"), fixture("when_ns.parquet"), "-o", scratch / "mixed"});
  CHECK(mixed.exit_code == 2);
  CHECK(mixed.err.find("time units or zones differ") != std::string::npos);
}

TEST_CASE("--dtype on a time column is refused: its integers mean nothing in another type") {
  if (!parquet_built()) return;
  ScratchDir scratch;
  const auto refused =
      run_cli({"pack", fixture("when_us.parquet"), "-o", scratch / "ds", "--dtype", "when=f32"});
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("'when'") != std::string::npos);
}

TEST_CASE("the manifest refuses a time on a column that is not i64, and an unknown unit") {
  ScratchDir scratch;
  const std::string out = scratch / "ds";
  if (!parquet_built()) return;
  REQUIRE(run_cli({"pack", fixture("when_us.parquet"), "-o", out}).exit_code == 0);
  bool hash_ok = false;
  auto manifest = shard::read_manifest(out + "/manifest.json", hash_ok);
  auto text = shard::manifest_to_text(manifest);
  auto edited = text;
  edited.replace(edited.find("\"unit\": \"us\""), 12, "\"unit\": \"hh\"");
  CHECK_THROWS_WITH_AS(shard::parse_manifest(edited, "m.json", hash_ok),
                       doctest::Contains("time.unit"), Error);
  manifest.columns[0].dtype = DType::i32;
  CHECK_THROWS_WITH_AS(shard::parse_manifest(shard::manifest_to_text(manifest), "m.json", hash_ok),
                       doctest::Contains("not an i64 tensor"), Error);
}
