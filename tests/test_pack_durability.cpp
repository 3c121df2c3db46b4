// pack --no-fsync: the same dataset, written without a single fsync (docs/cli.md "Crash safety").
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "gpucache/common/atomic_file.hpp"
#include "gpucache/npy.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/verify.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

namespace {

// Rows of which some fail the norm check, so the rejects file is written too.
void make_input(const std::string& path) {
  std::mt19937 random(5);
  std::uniform_real_distribution<float> uniform(-1, 1);
  write_npy(path, DType::f32, {3000, 32},
            [&](std::span<std::byte> out, std::uint64_t first, std::uint64_t) {
              auto* values = reinterpret_cast<float*>(out.data());
              for (std::size_t i = 0; i < out.size() / 4; ++i)
                values[i] = (first + i / 32) % 97 == 0 ? 0.0f : uniform(random);
            });
}

void check_same_files(const fs::path& expected, const fs::path& actual) {
  std::size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(expected)) {
    if (!entry.is_regular_file()) continue;
    const auto relative = fs::relative(entry.path(), expected);
    CAPTURE(relative.string());
    CHECK(test_support::read_bytes(entry.path().string()) ==
          test_support::read_bytes((actual / relative).string()));
    ++files;
  }
  CHECK(files > 2);
}

// Options packing `input` (written by make_input) in shards of 1000 rows.
PackOptions options_for(const std::string& input) {
  make_input(input);
  PackOptions options;
  options.inputs = {input};
  options.shard_rows = 1000;
  return options;
}

}  // namespace

TEST_CASE("a pack without fsync syncs nothing and writes the same dataset") {
  test_support::ScratchDir scratch;
  PackOptions options = options_for(scratch / "in.npy");
  options.splits = {{"train", 0.8}, {"val", 0.2}};
  options.output_dir = scratch / "flushed";
  options.rejects_path = scratch / "flushed-rejects.jsonl";
  const auto before_flushed = detail::fsync_count();
  const auto flushed = pack(options);
  CHECK(detail::fsync_count() > before_flushed);
  CHECK(fs::file_size(scratch / "flushed-rejects.jsonl") > 0);

  options.output_dir = scratch / "unflushed";
  options.rejects_path = scratch / "unflushed-rejects.jsonl";
  options.fsync = false;
  const auto before = detail::fsync_count();
  const auto unflushed = pack(options);
  CHECK(detail::fsync_count() == before);
  CHECK(unflushed.rows == flushed.rows);
  check_same_files(scratch / "flushed", scratch / "unflushed");
  CHECK(test_support::read_bytes(scratch / "flushed-rejects.jsonl") ==
        test_support::read_bytes(scratch / "unflushed-rejects.jsonl"));
  CHECK(verify(scratch / "unflushed/train").ok());
  CHECK(verify(scratch / "unflushed/val").ok());
}

TEST_CASE("--append without fsync syncs nothing either") {
  test_support::ScratchDir scratch;
  PackOptions options = options_for(scratch / "in.npy");
  options.output_dir = scratch / "ds";
  options.fsync = false;
  const auto before = detail::fsync_count();
  const auto first = pack(options);
  options.output_dir.clear();
  options.append_to = scratch / "ds";
  const auto appended = pack(options);
  CHECK(detail::fsync_count() == before);
  CHECK(appended.rows == first.rows);
  const auto report = verify(scratch / "ds");
  CHECK(report.ok());
}

TEST_CASE("gpucache pack --no-fsync gives the dataset pack gives") {
  test_support::ScratchDir scratch;
  make_input(scratch / "in.npy");
  REQUIRE(test_support::run_cli(
              {"pack", scratch / "in.npy", "-o", scratch / "a", "-q", "--shard-rows", "1000"})
              .exit_code == 0);
  const auto run = test_support::run_cli({"pack", scratch / "in.npy", "-o", scratch / "b", "-q",
                                          "--shard-rows", "1000", "--no-fsync"});
  REQUIRE(run.exit_code == 0);
  check_same_files(scratch / "a", scratch / "b");
  CHECK(test_support::run_cli({"verify", scratch / "b"}).exit_code == 0);
}
