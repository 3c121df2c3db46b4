// Remote paths through the real binary, without a server: what is refused before any request
// (bad URLs, bad settings, push of something that is not a finished dataset) exits 2 with one
// line naming the input. Transfers are tested against real servers in
// src/python/tests/test_remote.py.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include "test_support.hpp"

namespace fs = std::filesystem;
using test_support::run_cli;

namespace {

std::size_t lines(const std::string& text) {
  std::size_t count = 0;
  for (const char c : text) count += c == '\n';
  return count;
}

}  // namespace

TEST_CASE("malformed remote URLs are refused in one line, exit 2") {
  for (const auto& [url, says] : std::vector<std::pair<std::string, std::string>>{
           {"s3://Bad_Bucket/ds", "not a valid S3 bucket name"},
           {"s3://bucket/ds/shard-00000.gcs", "name the folder"},
           {"https://host/ds?x=1", "query"}}) {
    const auto result = run_cli({"verify", url});
    CAPTURE(result.err);
    CHECK(result.exit_code == 2);
    CHECK(result.err.find(says) != std::string::npos);
    CHECK(lines(result.err) == 1);
  }
}

TEST_CASE("push refuses what is not a finished dataset before sending anything") {
  const fs::path folder = fs::temp_directory_path() / "gpucache_test_cli_remote";
  fs::remove_all(folder);
  fs::create_directories(folder / "empty");
  const auto missing = run_cli({"push", (folder / "empty").string(), "s3://bucket/ds"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("manifest.json: missing") != std::string::npos);
  const auto not_folder =
      run_cli({"push", (folder / "nothing").string(), "s3://bucket/ds", "--json"});
  CHECK(not_folder.exit_code == 2);
  CHECK(not_folder.out.find("not a dataset folder") != std::string::npos);
  CHECK(run_cli({"push", (folder / "empty").string()}).exit_code == 2);  // no URL
  fs::remove_all(folder);
}
