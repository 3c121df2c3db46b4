// The shard module's dataset rules (gpucache/shard/dataset_check.hpp), on shards built in memory:
// each rule once, with the problem it reports. verify, pack --resume and the runtime reader call
// these; their own tests check that they do. Which files a dataset directory holds is the
// opener's (tests/test_dataset_open.cpp).
#include <doctest/doctest.h>

#include "gpucache/error.hpp"
#include "gpucache/shard/dataset_check.hpp"
#include "runtime_test_shards.hpp"

using namespace gpucache;
using namespace gpucache::shard;

namespace {

struct Built {
  std::vector<Layout> layouts;
  std::vector<FoundShard> found;
  Manifest manifest;
};

// Shards of `rows` rows each, as one pack writes them, with the manifest that lists them.
Built build(const std::vector<std::uint64_t>& rows, std::uint64_t dataset_id = 7) {
  const std::vector<test::TestColumn> columns{test::f32_column("emb", 100, 3),
                                              test::text_column("caption", 100)};
  test::ShardOptions options;
  options.shard_count = static_cast<std::uint32_t>(rows.size());
  options.dataset_id = dataset_id;
  for (std::uint64_t r : rows) options.dataset_rows += r;
  Built built;
  built.layouts.reserve(rows.size());
  std::uint64_t first = 0;
  for (std::uint32_t k = 0; k < rows.size(); ++k) {
    const auto bytes = test::build_shard(k, first, rows[k], columns, options);
    built.layouts.push_back(decode_layout(bytes, test::shard_name(k)));
    built.manifest.shards.push_back({test::shard_name(k), rows[k], first,
                                     static_cast<std::uint64_t>(bytes.size()),
                                     built.layouts.back().header.header_hash});
    first += rows[k];
  }
  for (const auto& column : built.layouts.front().columns) built.manifest.columns.push_back(column);
  built.manifest.rows = first;
  for (std::uint32_t k = 0; k < rows.size(); ++k)
    built.found.push_back({test::shard_name(k), &built.layouts[k]});
  return built;
}

std::vector<DatasetProblem> set_problems(const std::vector<FoundShard>& found) {
  std::vector<DatasetProblem> problems;
  check_shard_set(found, "ds", problems);
  return problems;
}

bool mentions(const std::vector<DatasetProblem>& problems, const std::string& text) {
  for (const auto& problem : problems)
    if ((problem.file + ": " + problem.location + ": " + problem.cause).find(text) !=
        std::string::npos)
      return true;
  return false;
}

}  // namespace

TEST_CASE("a pack's shards form one dataset and agree with its manifest") {
  const Built built = build({5, 7, 4});
  CHECK(set_problems(built.found).empty());
  std::vector<DatasetProblem> problems;
  check_manifest_rows(built.manifest, problems);
  for (std::size_t k = 0; k < 3; ++k)
    check_shard_against_manifest(built.found[k], built.manifest, k, problems);
  CHECK(problems.empty());
}

TEST_CASE("the shard set rules name what is wrong") {
  Built built = build({5, 7, 4});
  SUBCASE("a missing shard in the middle") {
    built.found.erase(built.found.begin() + 1);
    CHECK(mentions(set_problems(built.found), "shard index 1 is missing"));
  }
  SUBCASE("a missing last shard is caught by the dataset fields") {
    built.found.pop_back();
    CHECK(mentions(set_problems(built.found),
                   "ds: shard-00002.gcs: missing: the shards say the dataset has 3 shards"));
  }
  SUBCASE("a repeated shard") {
    built.found.insert(built.found.begin() + 2, built.found[1]);
    CHECK(mentions(set_problems(built.found), "shard index 1 appears twice"));
  }
  SUBCASE("a shard of another pack of the same shape") {
    const Built other = build({5, 7, 4}, 8);
    built.found[1] = other.found[1];
    CHECK(mentions(set_problems(built.found), "belongs to another dataset"));
  }
  SUBCASE("rows that do not follow on") {
    built.layouts[1].header.first_row = 6;
    CHECK(mentions(set_problems(built.found),
                   "first_row is 6 but the shards before it end at row 5"));
  }
  SUBCASE("different columns") {
    built.layouts[2].columns[0].row_shape = {4};
    CHECK(mentions(set_problems(built.found), "column 'emb' tensor f32 [4]"));
  }
}

TEST_CASE("the manifest rules name what is wrong") {
  const Built built = build({5, 7, 4});
  std::vector<DatasetProblem> problems;
  SUBCASE("the shard list's rows do not follow on or add up") {
    Manifest edited = built.manifest;
    edited.shards[1].first_row = 6;
    edited.rows = 15;
    check_manifest_rows(edited, problems);
    CHECK(mentions(problems, "manifest.json: shards[1]: first_row does not follow"));
    CHECK(mentions(problems, "manifest.json: rows: total rows do not match the shards listed"));
    problems.clear();
    check_manifest_rows(built.manifest, problems);
    CHECK(problems.empty());
  }
  SUBCASE("a replaced shard: its header hash differs from the recorded one") {
    Manifest edited = built.manifest;
    edited.shards[1].header_hash ^= 1;
    check_shard_against_manifest(built.found[1], edited, 1, problems);
    CHECK(mentions(problems, "header hash"));
    CHECK(mentions(problems, "according to manifest.json"));
  }
  SUBCASE("swapped shards") {
    check_shard_against_manifest(built.found[2], built.manifest, 1, problems);
    CHECK(mentions(problems, "shard-00002.gcs: header: header hash"));
    CHECK(mentions(problems, "(shard replaced or swapped?)"));
  }
  SUBCASE("columns that differ from the manifest's") {
    Manifest edited = built.manifest;
    edited.columns[0].padded_dim = 32;
    check_shard_against_manifest(built.found[0], edited, 0, problems);
    CHECK(mentions(problems, "columns differ from the manifest"));
  }
}

TEST_CASE("a shard sits at its planned place only with the plan's dataset fields") {
  const Built built = build({5, 7});
  const Header& header = built.layouts[1].header;
  ShardPlace place{1, 5, 7, 2, 12, 7, std::nullopt};
  CHECK_FALSE(place_mismatch(header, place).has_value());
  place.dataset_id = 9;
  CHECK(place_mismatch(header, place)->find("another dataset") != std::string::npos);
  place.dataset_id = 7;
  place.rows = 6;
  CHECK(place_mismatch(header, place)->find("belongs at shard 1 with rows 5-11") !=
        std::string::npos);
  place.rows = 7;
  place.dataset_rows = 13;
  CHECK(place_mismatch(header, place)->find("12 rows, not 2 and 13") != std::string::npos);
}

TEST_CASE("throw_first reports the first problem as an error naming the shard's path") {
  CHECK_NOTHROW(throw_first({}, "ds"));
  try {
    throw_first({{"shard-00001.gcs", "header byte 40", "bad"}, {"ds", "", "worse"}}, "ds");
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(std::string(error.what()) == "ds/shard-00001.gcs: header byte 40: bad");
  }
  try {
    throw_first({{"ds", "", "the shards hold 3 rows"}}, "ds");
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(std::string(error.what()) == "ds: the shards hold 3 rows");
  }
}

// Two pack runs joined (merge, append): each run's headers count within their segment, and the
// manifest's segments place them (SPEC.md, "Segments").
TEST_CASE("segments: shards of two pack runs agree with the manifest that joins them") {
  const Built first = build({5, 7}, 11), second = build({4, 6}, 12);
  Manifest joined;
  joined.columns = first.manifest.columns;
  joined.shards = first.manifest.shards;
  for (auto shard : second.manifest.shards) {
    shard.first_row += first.manifest.rows;
    joined.shards.push_back(shard);
  }
  joined.rows = first.manifest.rows + second.manifest.rows;
  joined.segments = {{0, 2, 0, 12, 11}, {2, 2, 12, 10, 12}};
  const std::vector<FoundShard> found{first.found[0], first.found[1], second.found[0],
                                      second.found[1]};
  std::vector<DatasetProblem> problems;
  for (std::size_t k = 0; k < found.size(); ++k)
    check_shard_against_manifest(found[k], joined, k, problems);
  CHECK(problems.empty());
  const ShardPlace place = manifest_place(joined, 3);
  CHECK(place.index == 1);
  CHECK(place.first_row == 4);
  CHECK(place.shard_count == 2);
  CHECK(place.dataset_rows == 10);
  CHECK(place.dataset_id == 12u);
  CHECK(place.header_hash == second.manifest.shards[1].header_hash);

  // The manifest text keeps the segments, and its parser checks that they cover the shards.
  bool hash_ok = false;
  const Manifest parsed = parse_manifest(manifest_to_text(joined), "m.json", hash_ok);
  CHECK(hash_ok);
  CHECK(parsed.segments == joined.segments);
  Manifest gap = joined;
  gap.segments[1].first_row = 13;
  CHECK_THROWS_WITH(parse_manifest(manifest_to_text(gap), "m.json", hash_ok),
                    doctest::Contains("does not follow the previous segment"));
  // A shard of the second run at the first run's place is refused: its segment differs.
  check_shard_against_manifest(second.found[0], joined, 0, problems);
  CHECK(mentions(problems, "shard-00000.gcs: header: header hash"));
  // Without segments a manifest is one segment: the whole dataset, no id recorded.
  CHECK_FALSE(manifest_place(first.manifest, 1).dataset_id.has_value());
  CHECK(manifest_place(first.manifest, 1).first_row == 5);
}
