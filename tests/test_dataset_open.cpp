// The dataset opener (gpucache/shard/dataset_open.hpp): every mode on the same damaged datasets (a
// missing shard, an extra shard file, a truncated shard, a manifest whose hash does not match, a
// leftover temporary, no manifest), with what each refuses, tolerates or reports. The callers'
// own tests (verify, export, merge, --append, push, inspect, the runtime) check that they call it
// with their mode.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gpucache/error.hpp"
#include "gpucache/shard/dataset_open.hpp"
#include "runtime_test_shards.hpp"

using namespace gpucache;
using namespace gpucache::shard;
namespace fs = std::filesystem;

namespace {

constexpr OpenMode kAllModes[] = {OpenMode::strict, OpenMode::audit, OpenMode::listed,
                                  OpenMode::manifest_only, OpenMode::lenient};

// Three shards of 5, 7 and 4 rows with the manifest that lists them.
void write_three_shards(const fs::path& dir) {
  test::write_dataset(dir, {test::f32_column("emb", 16, 3), test::text_column("caption", 16)},
                      {5, 7, 4});
}

// The message a mode refuses with, or "" when it opens the dataset.
std::string refusal(const fs::path& dir, OpenMode mode) {
  try {
    open_dataset(dir.string(), mode);
    return "";
  } catch (const Error& error) {
    return error.what();
  }
}

std::string problems_text(const OpenedDataset& opened) {
  std::string text;
  for (const auto& problem : opened.problems)
    text += problem.file + ": " + problem.location + ": " + problem.cause + "\n";
  return text;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void edit_manifest(const fs::path& dir, const std::string& from, const std::string& to) {
  std::ifstream in(dir / "manifest.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string edited = text.str();
  const auto at = edited.find(from);
  REQUIRE(at != std::string::npos);
  edited.replace(at, from.size(), to);
  std::ofstream(dir / "manifest.json", std::ios::trunc) << edited;
}

}  // namespace

TEST_CASE("an intact dataset opens in every mode with nothing to report") {
  test::TempDir dir;
  write_three_shards(dir.path());
  for (const OpenMode mode : kAllModes) {
    CAPTURE(open_mode_name(mode));
    const auto opened = open_dataset(dir.path().string(), mode);
    REQUIRE(opened.manifest.has_value());
    CHECK(opened.manifest->shards.size() == 3);
    CHECK(opened.hash_ok);
    CHECK(opened.problems.empty());
    CHECK(opened.unlisted.empty());
    if (mode == OpenMode::manifest_only) {
      CHECK(opened.shard_files.empty());  // the directory is not listed
    } else {
      CHECK(opened.shard_files.size() == 3);
      CHECK(opened.listed_intact == std::vector<bool>{true, true, true});
    }
  }
}

TEST_CASE("a missing shard") {
  test::TempDir dir;
  write_three_shards(dir.path());
  fs::remove(dir / "shard-00001.gcs");
  const std::string cause = "shard-00001.gcs: missing: listed in the manifest but not on disk";
  CHECK(has(refusal(dir.path(), OpenMode::strict), cause));
  CHECK(has(refusal(dir.path(), OpenMode::strict), (dir / "shard-00001.gcs").string()));
  CHECK(has(refusal(dir.path(), OpenMode::listed), cause));
  // The runtime finds out when a load maps the shard.
  CHECK(refusal(dir.path(), OpenMode::manifest_only).empty());
  for (const OpenMode mode : {OpenMode::audit, OpenMode::lenient}) {
    const auto opened = open_dataset(dir.path().string(), mode);
    CHECK(has(problems_text(opened), "shard-00001.gcs: : missing"));
    CHECK(opened.problems.size() == 1);
    CHECK(opened.listed_intact == std::vector<bool>{true, false, true});
  }
}

TEST_CASE("an extra shard file") {
  test::TempDir dir;
  write_three_shards(dir.path());
  fs::copy_file(dir / "shard-00001.gcs", dir / "shard-00003.gcs");
  CHECK(has(refusal(dir.path(), OpenMode::strict),
            "shard-00003.gcs: extra shard: not listed in the manifest"));
  // A killed append leaves one: the listed mode names it and opens the dataset.
  const auto listed = open_dataset(dir.path().string(), OpenMode::listed);
  CHECK(listed.unlisted == std::vector<std::string>{"shard-00003.gcs"});
  CHECK(listed.problems.empty());
  CHECK(refusal(dir.path(), OpenMode::manifest_only).empty());
  for (const OpenMode mode : {OpenMode::audit, OpenMode::lenient}) {
    const auto opened = open_dataset(dir.path().string(), mode);
    CHECK(problems_text(opened) == "shard-00003.gcs: : extra shard: not listed in the manifest\n");
    CHECK(opened.unlisted == std::vector<std::string>{"shard-00003.gcs"});
  }
}

TEST_CASE("a truncated and an extended shard") {
  test::TempDir dir;
  write_three_shards(dir.path());
  const auto size = fs::file_size(dir / "shard-00002.gcs");
  fs::resize_file(dir / "shard-00002.gcs", size - 10);
  const std::string cause = "shard-00002.gcs: is " + std::to_string(size - 10) +
                            " bytes but the manifest says " + std::to_string(size) + " (truncated)";
  CHECK(has(refusal(dir.path(), OpenMode::strict), cause));
  CHECK(has(refusal(dir.path(), OpenMode::listed), cause));
  CHECK(refusal(dir.path(), OpenMode::manifest_only).empty());
  for (const OpenMode mode : {OpenMode::audit, OpenMode::lenient}) {
    const auto opened = open_dataset(dir.path().string(), mode);
    CHECK(has(problems_text(opened), "(truncated)"));
    CHECK(opened.listed_intact == std::vector<bool>{true, true, false});
  }
  fs::resize_file(dir / "shard-00002.gcs", size + 10);
  CHECK(has(refusal(dir.path(), OpenMode::strict), "(extended)"));
}

TEST_CASE("a manifest whose hash does not match its content") {
  test::TempDir dir;
  write_three_shards(dir.path());
  edit_manifest(dir.path(), "\"version\": \"test\"", "\"version\": \"tesT\"");
  const std::string cause = "manifest.json: manifest_hash: does not match the manifest's content";
  for (const OpenMode mode : {OpenMode::strict, OpenMode::listed, OpenMode::manifest_only}) {
    CAPTURE(open_mode_name(mode));
    const std::string message = refusal(dir.path(), mode);
    CHECK(has(message, cause));
    CHECK(has(message, "run gpucache verify"));
  }
  for (const OpenMode mode : {OpenMode::audit, OpenMode::lenient}) {
    const auto opened = open_dataset(dir.path().string(), mode);
    CHECK_FALSE(opened.hash_ok);
    REQUIRE(opened.manifest.has_value());  // shown all the same
    CHECK(problems_text(opened) ==
          "manifest.json: manifest_hash: does not match the manifest's content: manifest.json was "
          "edited or corrupted\n");
  }
}

TEST_CASE("a manifest whose shard list does not add up is refused even without the files") {
  test::TempDir dir;
  write_three_shards(dir.path());
  // Written with a hash that matches: the total is what is wrong.
  bool hash_ok = false;
  auto manifest = read_manifest((dir / "manifest.json").string(), hash_ok);
  manifest.rows = 17;
  std::ofstream(dir / "manifest.json", std::ios::trunc) << manifest_to_text(manifest);
  for (const OpenMode mode : {OpenMode::strict, OpenMode::listed, OpenMode::manifest_only})
    CHECK(has(refusal(dir.path(), mode),
              "manifest.json: rows: total rows do not match the shards listed"));
  CHECK(has(problems_text(open_dataset(dir.path().string(), OpenMode::audit)),
            "total rows do not match"));
}

TEST_CASE("a leftover temporary") {
  test::TempDir dir;
  write_three_shards(dir.path());
  fs::copy_file(dir / "shard-00001.gcs", dir / "shard-00003.gcs.tmp");
  CHECK(has(refusal(dir.path(), OpenMode::strict),
            "shard-00003.gcs.tmp: leftover temporary file from an interrupted pack"));
  CHECK(refusal(dir.path(), OpenMode::listed).empty());
  CHECK(refusal(dir.path(), OpenMode::manifest_only).empty());
  CHECK(open_dataset(dir.path().string(), OpenMode::audit).problems.size() == 1);
}

TEST_CASE("no manifest: what the directory holds says why") {
  test::TempDir dir;
  write_three_shards(dir.path());
  fs::remove(dir / "manifest.json");
  for (const OpenMode mode :
       {OpenMode::strict, OpenMode::listed, OpenMode::manifest_only, OpenMode::lenient})
    CHECK(has(refusal(dir.path(), mode), "manifest.json: missing: the dataset is unfinished"));
  const auto audited = open_dataset(dir.path().string(), OpenMode::audit);
  CHECK_FALSE(audited.manifest.has_value());
  CHECK(has(problems_text(audited), "manifest.json: : missing: the dataset is unfinished"));
  CHECK(audited.shard_files.size() == 3);  // verify checks them without a manifest

  std::ofstream(dir / "pack-state.json") << "{}";
  CHECK(has(refusal(dir.path(), OpenMode::manifest_only), "pack --resume finishes it"));

  for (const auto& entry : fs::directory_iterator(dir.path())) fs::remove(entry.path());
  CHECK(has(refusal(dir.path(), OpenMode::strict), "no shard-*.gcs files: not a gpucache dataset"));
  CHECK(has(refusal(dir / "absent", OpenMode::audit), "is not a dataset directory"));
}

TEST_CASE("a malformed manifest is refused, except by the audit") {
  test::TempDir dir;
  write_three_shards(dir.path());
  std::ofstream(dir / "manifest.json", std::ios::trunc) << "{\"format\": 3";
  for (const OpenMode mode :
       {OpenMode::strict, OpenMode::listed, OpenMode::manifest_only, OpenMode::lenient})
    CHECK_FALSE(refusal(dir.path(), mode).empty());
  const auto audited = open_dataset(dir.path().string(), OpenMode::audit);
  CHECK_FALSE(audited.manifest.has_value());
  REQUIRE(audited.problems.size() == 1);
  CHECK(audited.problems[0].file == "manifest.json");
}

TEST_CASE("every mode has its own name") {
  std::vector<std::string_view> names;
  for (const OpenMode mode : kAllModes) names.push_back(open_mode_name(mode));
  CHECK(names ==
        std::vector<std::string_view>{"strict", "audit", "listed", "manifest_only", "lenient"});
}
