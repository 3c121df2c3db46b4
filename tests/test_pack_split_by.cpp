// --split-by COLUMN (pack_split_by.hpp): one dataset per value of a text or integer column, the
// column kept, directory names made legal and reported, and every refusal before anything is
// written.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "gpucache/error.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard_io/shard_reader.hpp"
#include "gpucache/verify.hpp"
#include "pack_split_by.hpp"
#include "pack_test_support.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

namespace {

// JSON lines of {"id", "pair": [2 ints], "split", "fold", "weight"}: row i is in split
// `splits[i % n]` and fold i % 3 - 1 (-1, 0, 1). No float vector, so every key is a column of its
// own name (a lone float vector would make the rows an embedding layout).
std::string write_rows(const test_support::ScratchDir& scratch, const std::string& name,
                       const std::vector<std::string>& splits, int rows) {
  const std::string path = scratch / name;
  std::ofstream out(path);
  for (int i = 0; i < rows; ++i)
    out << "{\"id\": " << i << ", \"pair\": [" << i << ", 1], \"split\": "
        << nlohmann::json(splits[static_cast<std::size_t>(i) % splits.size()]).dump()
        << ", \"fold\": " << i % 3 - 1 << ", \"weight\": " << i << ".5}\n";
  return path;
}

// Per shard of a dataset: the i64 column `column`'s values, in row order.
std::vector<std::int64_t> int_column(const std::string& dir, const std::string& column) {
  std::vector<std::int64_t> values;
  for (std::uint32_t s = 0; fs::exists(dir + "/" + shard::shard_file_name(s)); ++s) {
    shard::ShardReader reader(dir + "/" + shard::shard_file_name(s));
    const auto data = reader.tensor_data(*reader.find_column(column));
    for (std::size_t i = 0; i < data.size() / 8; ++i) {
      std::int64_t value;
      std::memcpy(&value, data.data() + 8 * i, 8);
      values.push_back(value);
    }
  }
  return values;
}

std::vector<std::string> text_column(const std::string& dir, const std::string& column) {
  std::vector<std::string> values;
  for (std::uint32_t s = 0; fs::exists(dir + "/" + shard::shard_file_name(s)); ++s) {
    shard::ShardReader reader(dir + "/" + shard::shard_file_name(s));
    const auto c = *reader.find_column(column);
    for (std::uint64_t r = 0; r < reader.rows(); ++r) values.emplace_back(reader.text(c, r));
  }
  return values;
}

}  // namespace

TEST_CASE("split_directory_name keeps letters, digits, '-', '_', '.'; nothing hidden or empty") {
  CHECK(detail::split_directory_name("train") == "train");
  CHECK(detail::split_directory_name("-3") == "-3");
  CHECK(detail::split_directory_name("en/US x") == "en_US_x");
  CHECK(detail::split_directory_name("d\xc3\xa9j\xc3\xa0") == "d_j_");  // one '_' per character
  CHECK(detail::split_directory_name("") == "_");
  CHECK(detail::split_directory_name(".") == "_.");
  CHECK(detail::split_directory_name("..") == "_..");
  CHECK(detail::split_directory_name(".hidden") == "_.hidden");
  CHECK(detail::split_directory_name(std::string(300, 'a')).size() == detail::kMaxSplitNameBytes);
}

TEST_CASE("--split-by a text column: one complete dataset per value, the column kept") {
  test_support::ScratchDir scratch;
  const std::string input =
      write_rows(scratch, "rows.jsonl", {"train", "val", "train", "test"}, 40);
  PackOptions options;
  options.inputs = {input};
  options.output_dir = scratch / "out";
  options.split_by = "split";
  const PackResult result = pack(options);
  CHECK(result.split_by == "split");
  CHECK_FALSE(result.split_by_integer);
  REQUIRE(result.splits.size() == 3);
  // Ascending by value.
  CHECK(result.splits[0].name == "test");
  CHECK(result.splits[1].name == "train");
  CHECK(result.splits[2].name == "val");
  CHECK(result.splits[0].rows == 10);
  CHECK(result.splits[1].rows == 20);
  CHECK(result.splits[2].rows == 10);
  CHECK(result.rows == 40);
  std::set<std::int64_t> ids;
  for (const auto& split : result.splits) {
    const std::string dir = scratch / ("out/" + split.name);
    CHECK(split.output_dir == dir);
    CHECK(split.value == split.name);
    CHECK(verify(dir).ok());
    for (const auto& value : text_column(dir, "split")) CHECK(value == split.name);
    for (const std::int64_t id : int_column(dir, "id")) {
      CHECK(ids.insert(id).second);  // disjoint
      const char* expected[] = {"train", "val", "train", "test"};
      CHECK(split.name == expected[id % 4]);
    }
    const auto manifest = test_support::manifest_json(dir);
    CHECK(manifest["split"]["name"] == split.name);
    CHECK(manifest["split"]["by"] == "split");
    CHECK(manifest["split"]["value"] == split.name);
    CHECK(manifest["split"]["rows"]["train"] == 20);
    CHECK(manifest["split"]["values"]["val"] == "val");
  }
  CHECK(ids.size() == 40);  // complete
  const auto json = nlohmann::json::parse(result.to_json());
  CHECK(json["split_by"] == "split");
  CHECK(json["splits"][1]["value"] == "train");
  CHECK(json["splits"][1]["rows"] == 20);
  CHECK_FALSE(json["splits"][1].contains("fraction"));
  CHECK(result.notes_text().empty());  // no value renamed
}

TEST_CASE("--split-by an integer column: values by number, spelled in decimal; renames reported") {
  test_support::ScratchDir scratch;
  const std::string input = write_rows(scratch, "rows.jsonl", {"a b", "c"}, 30);
  PackOptions options;
  options.inputs = {input};
  options.output_dir = scratch / "folds";
  options.split_by = "fold";
  const PackResult result = pack(options);
  CHECK(result.split_by_integer);
  REQUIRE(result.splits.size() == 3);
  CHECK(result.splits[0].name == "-1");
  CHECK(result.splits[1].name == "0");
  CHECK(result.splits[2].name == "1");
  for (const auto& split : result.splits) {
    CHECK(split.rows == 10);
    for (const std::int64_t fold : int_column(split.output_dir, "fold"))
      CHECK(std::to_string(fold) == split.name);
  }
  const auto manifest = test_support::manifest_json(scratch / "folds/-1");
  CHECK(manifest["split"]["value"] == -1);  // a JSON number, as the column holds it
  CHECK(nlohmann::json::parse(result.to_json())["splits"][0]["value"] == -1);

  // A value that is no legal name is written under its legal name, and said so.
  options.output_dir = scratch / "renamed";
  options.split_by = "split";
  const PackResult renamed = pack(options);
  REQUIRE(renamed.splits.size() == 2);
  CHECK(renamed.splits[0].name == "a_b");
  CHECK(renamed.splits[0].value == "a b");
  CHECK(fs::exists(scratch / "renamed/a_b/manifest.json"));
  CHECK(renamed.notes_text().find("the value 'a b' is written to") != std::string::npos);
  CHECK(test_support::manifest_json(scratch / "renamed/a_b")["split"]["value"] == "a b");
}

TEST_CASE("--split-by refusals name the column and come before anything is written") {
  test_support::ScratchDir scratch;
  PackOptions options;
  options.output_dir = scratch / "out";
  auto refused = [&](const std::string& message) {
    CHECK_THROWS_WITH(pack(options), doctest::Contains(message.c_str()));
    CHECK_FALSE(fs::exists(options.output_dir));
  };
  options.inputs = {write_rows(scratch, "rows.jsonl", {"train", "val"}, 10)};
  options.split_by = "pair";
  refused("column 'pair': holds a sequence of values per row; --split-by takes a text or integer");
  options.split_by = "weight";
  refused("column 'weight': holds f64 values; --split-by takes a text or integer column");
  options.split_by = "missing";
  refused("no packed column has that name (the columns: id, pair, split, fold, weight)");
  options.split_by = "split";
  options.splits = parse_split_spec("train=0.5,val=0.5");
  refused("--split and --split-by cannot be combined");
  options.splits.clear();
  options.part = PartSpec{0, 2};
  refused("--part and --split-by cannot be combined");
  options.part.reset();
  options.append_to = scratch / "out";
  options.output_dir.clear();
  refused("--append cannot be combined with --split-by");
  options.append_to.clear();
  options.output_dir = scratch / "out";

  // Two values, one directory name.
  options.inputs = {write_rows(scratch, "clash.jsonl", {"a/b", "a b"}, 4)};
  options.split_by = "split";
  refused("values 'a/b' and 'a b' both make the directory name 'a_b'");

  // More values than a split column has.
  std::vector<std::string> many;
  for (std::size_t i = 0; i <= detail::kMaxSplitValues; ++i)
    many.push_back("v" + std::to_string(i));
  options.inputs = {write_rows(scratch, "many.jsonl", many, static_cast<int>(many.size()))};
  refused("holds more than 256 distinct values");
}

TEST_CASE("--split-by with --resume resumes each value's dataset; a finished one is refused") {
  test_support::ScratchDir scratch;
  PackOptions options;
  options.inputs = {write_rows(scratch, "rows.jsonl", {"train", "val"}, 20)};
  options.output_dir = scratch / "out";
  options.split_by = "split";
  pack(options);
  // Each split directory is resumed on its own, as with --split (output_dir.hpp): a finished
  // one has nothing to resume.
  options.resume = true;
  CHECK_THROWS_WITH_AS(pack(options), doctest::Contains("already finished"), Error);
  CHECK(verify(scratch / "out/train").ok());
}

TEST_CASE("gpucache pack --split-by: the splits in --json, a refusal as one line and exit 2") {
  test_support::ScratchDir scratch;
  const std::string input = write_rows(scratch, "rows.jsonl", {"train", "val"}, 10);
  const auto packed = test_support::run_cli(
      {"pack", input, "-o", scratch / "out", "--split-by", "split", "--json"});
  REQUIRE(packed.exit_code == 0);
  const auto json = nlohmann::json::parse(packed.out);
  CHECK(json["split_by"] == "split");
  REQUIRE(json["splits"].size() == 2);
  CHECK(json["splits"][0]["name"] == "train");
  CHECK(json["splits"][0]["value"] == "train");
  CHECK(json["splits"][0]["rows"] == 5);
  CHECK(json["splits"][0]["output"] == scratch / "out/train");
  const auto inspected = test_support::run_cli({"inspect", scratch / "out/val"});
  CHECK(inspected.out.find("split: val (split = \"val\") of train 5 rows, val 5 rows") !=
        std::string::npos);

  const auto refused = test_support::run_cli(
      {"pack", input, "-o", scratch / "both", "--split-by", "split", "--split", "a=0.5,b=0.5"});
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("--split and --split-by cannot be combined") != std::string::npos);
  CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
}
