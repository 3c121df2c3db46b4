// pack checks the size of its output before it writes it (docs/cli.md, "Resource bounds"), through
// the real binary: --max-output and the free space of the output file system (stood in for by
// GPUCACHE_TEST_FREE_BYTES) refuse a run in one line, exit 2, leaving nothing behind; the planned
// size is exactly the bytes written, for every layout; a repeated (stride-0) view too large for
// the cap is refused before validation reads its rows.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "gpucache/error.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/shard_io/shard_writer.hpp"
#include "pack_test_support.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;
using test_support::run_cli;
using test_support::RunResult;
using test_support::ScratchDir;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void check_one_line(const RunResult& result) {
  CAPTURE(result.err);
  CHECK(result.exit_code == 2);
  REQUIRE(!result.err.empty());
  CHECK(result.err.find('\n') == result.err.size() - 1);
}

// GPUCACHE_TEST_FREE_BYTES for the binaries this scope runs.
class FakeFreeSpace {
 public:
  explicit FakeFreeSpace(std::uint64_t bytes) {
    ::setenv("GPUCACHE_TEST_FREE_BYTES", std::to_string(bytes).c_str(), 1);
  }
  ~FakeFreeSpace() { ::unsetenv("GPUCACHE_TEST_FREE_BYTES"); }
  FakeFreeSpace(const FakeFreeSpace&) = delete;
  FakeFreeSpace& operator=(const FakeFreeSpace&) = delete;
};

std::string embeddings_npy(const ScratchDir& scratch, std::uint64_t rows, std::uint64_t dim) {
  std::mt19937 random(7);
  std::normal_distribution<float> normal;
  std::vector<float> values(rows * dim);
  for (auto& value : values) value = normal(random);
  const std::string path = scratch / "emb.npy";
  test_support::save_npy(path, DType::f32, {rows, dim}, values);
  return path;
}

std::string tokens_jsonl(const ScratchDir& scratch, std::uint64_t rows) {
  const std::string path = scratch / "tokens.jsonl";
  std::ofstream jsonl(path);
  for (std::uint64_t r = 0; r < rows; ++r) {
    jsonl << "{\"text\": \"" << std::string(r % 37, 'x') << "\", \"tokens\": [";
    for (std::uint64_t t = 0; t < r % 11; ++t) jsonl << (t ? ", " : "") << t * r;
    jsonl << "], \"label\": " << r << "}\n";
  }
  return path;
}

// The bytes of every file in `dir` and below.
std::uint64_t bytes_under(const std::string& dir) {
  std::uint64_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".gcs") bytes += entry.file_size();
  return bytes;
}

}  // namespace

TEST_CASE("--max-output parses sizes and none") {
  CHECK(parse_max_output("none") == UINT64_MAX);
  CHECK(parse_max_output("2T") == 2ull << 40);
  CHECK(parse_max_output("4096") == 4096);
  CHECK_THROWS_AS(parse_max_output("lots"), UsageError);
  CHECK(PackOptions{}.max_output == kDefaultMaxOutput);
}

TEST_CASE("estimate_shard_bytes is the size write() gives a shard, at most a compressed one's") {
  const std::vector<Column> columns = {
      {"embedding", ColumnKind::tensor, DType::f16, {10}, 16},
      {"text", ColumnKind::text, DType::u8, {}, 1},
      {"tokens", ColumnKind::sequence, DType::i64, {}, 0},
      {"image", ColumnKind::tensor, DType::u8, {3, 5}, 5},
      {"@source_row", ColumnKind::tensor, DType::i64, {}, 1},
  };
  ScratchDir scratch;
  for (const std::uint64_t rows : {1ull, 7ull, 4096ull, 70000ull}) {
    const std::vector<std::uint64_t> value_bytes = {0, rows * 13 + 5, rows * 3 * 8, 0, 0};
    const std::uint64_t estimate = shard::estimate_shard_bytes(columns, rows, value_bytes);
    for (int zstd_level : {0, 3}) {
      CAPTURE(rows);
      CAPTURE(zstd_level);
      const std::string path = scratch / ("shard-" + std::to_string(zstd_level) + ".gcs");
      shard::ShardBuilder builder(columns, rows, value_bytes);
      shard::WriteOptions options;
      options.zstd_level = zstd_level;
      const auto written = builder.write(path, options);
      CHECK(written.bytes == fs::file_size(path));
      if (zstd_level == 0)
        CHECK(written.bytes == estimate);
      else
        CHECK(written.bytes <= estimate);
    }
  }
}

TEST_CASE("the planned output is exactly the bytes pack writes, for every layout") {
  ScratchDir scratch;
  const std::string npy = embeddings_npy(scratch, 3000, 24);
  const std::string jsonl = tokens_jsonl(scratch, 700);
  struct Layout {
    const char* name;
    std::vector<std::string> arguments;
  };
  const std::vector<Layout> layouts = {
      {"fixed rows, one shard", {npy}},
      {"fixed rows, many shards", {npy, "--shard-size", "64K"}},
      {"fixed rows, f16 and --shard-rows", {npy, "--dtype", "f16", "--shard-rows", "1000"}},
      {"text, sequences and labels", {jsonl, "--shard-size", "16K"}},
      {"splits", {npy, "--split", "train=0.8,val=0.2", "--shard-size", "64K"}},
  };
  for (std::size_t l = 0; l < layouts.size(); ++l) {
    const Layout& layout = layouts[l];
    const std::string name = layout.name;
    CAPTURE(name);
    auto run = [&](const std::string& dir, std::vector<std::string> extra) {
      const std::string out = scratch / (dir + std::to_string(l));
      std::vector<std::string> arguments = {"pack"};
      arguments.insert(arguments.end(), layout.arguments.begin(), layout.arguments.end());
      arguments.insert(arguments.end(), {"-o", out, "-q", "--json"});
      arguments.insert(arguments.end(), extra.begin(), extra.end());
      return run_cli(arguments);
    };
    const auto first = run("first", {});
    CAPTURE(first.err);
    REQUIRE(first.exit_code == 0);
    const auto result = nlohmann::json::parse(first.out);
    const std::uint64_t written = result["bytes"].get<std::uint64_t>();
    CHECK(written == bytes_under(scratch / ("first" + std::to_string(l))));
    std::uint64_t shards = result.contains("shards") ? result["shards"].size() : 0;
    if (result.contains("splits"))
      for (const auto& split : result["splits"]) shards += split["shards"].size();
    CHECK(shards > 0);

    // A cap of exactly the bytes written lets the run through; one byte less refuses it, naming
    // the exact figure.
    const auto exact = run("exact", {"--max-output", std::to_string(written)});
    CAPTURE(exact.err);
    CHECK(exact.exit_code == 0);
    const auto below = run("below", {"--max-output", std::to_string(written - 1)});
    check_one_line(below);
    CHECK(contains(below.err, "(" + std::to_string(written) + " bytes) of shards"));
    CHECK(contains(below.err, "--max-output"));
    CHECK(!fs::exists(scratch / ("below" + std::to_string(l))));

    // The same with the free space, less its margin of 1 MiB + 1 KiB per shard.
    const std::uint64_t margin = (1 << 20) + 1024 * shards;
    {
      FakeFreeSpace free(written + margin);
      CHECK(run("fits", {}).exit_code == 0);
    }
    {
      FakeFreeSpace free(written + margin - 1);
      const auto full = run("full", {});
      check_one_line(full);
      CHECK(contains(full.err, "free space"));
      CHECK(contains(full.err, "(" + std::to_string(written) + " bytes) of shards"));
      CHECK(contains(full.err, "choose another output directory"));
      CHECK(!fs::exists(scratch / ("full" + std::to_string(l))));
    }
  }
}

TEST_CASE("compressed shards are checked at their uncompressed size, an upper bound") {
  ScratchDir scratch;
  const std::string npy = embeddings_npy(scratch, 2000, 16);
  const auto plain = run_cli({"pack", npy, "-o", scratch / "plain", "-q", "--json"});
  REQUIRE(plain.exit_code == 0);
  const std::uint64_t uncompressed = nlohmann::json::parse(plain.out)["bytes"].get<std::uint64_t>();
  const auto refused = run_cli({"pack", npy, "-o", scratch / "zstd", "-q", "--compress", "zstd",
                                "--max-output", std::to_string(uncompressed - 1)});
  check_one_line(refused);
  CHECK(contains(refused.err, std::to_string(uncompressed) + " bytes"));
  CHECK(run_cli({"pack", npy, "-o", scratch / "zstd", "-q", "--compress", "zstd", "--max-output",
                 std::to_string(uncompressed)})
            .exit_code == 0);
}

TEST_CASE("a run refused for space leaves an existing dataset as it was, and --force counts it") {
  ScratchDir scratch;
  const std::string npy = embeddings_npy(scratch, 4000, 32);
  const std::string out = scratch / "ds";
  const auto first = run_cli({"pack", npy, "-o", out, "-q", "--json"});
  REQUIRE(first.exit_code == 0);
  const std::uint64_t written = nlohmann::json::parse(first.out)["bytes"].get<std::uint64_t>();
  const auto manifest_before = test_support::read_bytes(out + "/manifest.json");
  {
    // Too little free space even counting the dataset --force would remove: refused, untouched.
    FakeFreeSpace free((1 << 20) + 1024);
    const auto refused =
        run_cli({"pack", npy, "-o", out, "-q", "--force", "--dtype", "f32", "--pad-to", "64"});
    check_one_line(refused);
    CHECK(test_support::read_bytes(out + "/manifest.json") == manifest_before);
  }
  {
    // The replaced dataset's bytes are free for the new one: the same output fits again.
    FakeFreeSpace free((1 << 20) + 1024);
    const auto replaced = run_cli({"pack", npy, "-o", out, "-q", "--force", "--json"});
    CAPTURE(replaced.err);
    CHECK(replaced.exit_code == 0);
    CHECK(bytes_under(out) == written);
  }
}

TEST_CASE("a repeated view too large for the cap or the disk is refused before validation") {
  // expand_large.pt: arange(8).expand(2^27 - 1, 8), a 762-byte file whose view stays within the
  // reader's 4 GiB limit for repeating views but makes 9.5 GiB of shards.
  ScratchDir scratch;
  const std::string view = test_support::data_path("hostile/expand_large.pt");
  using Clock = std::chrono::steady_clock;
  {
    const auto start = Clock::now();
    const auto capped = run_cli({"pack", view, "-o", scratch / "capped", "--max-output", "1G"});
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    check_one_line(capped);
    CHECK(seconds < 1.0);
    CHECK(contains(capped.err, "the inputs' 134217727 rows make at least 9.5 GiB"));
    CHECK(contains(capped.err, "more than the cap of 1.0 GiB"));
    CHECK(!fs::exists(scratch / "capped"));
  }
  {
    FakeFreeSpace free(1ull << 30);
    const auto start = Clock::now();
    const auto full = run_cli({"pack", view, "-o", scratch / "full"});
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    check_one_line(full);
    CHECK(seconds < 1.0);
    CHECK(contains(full.err, "free space"));
    CHECK(contains(full.err, "1.0 GiB (1073741824 bytes) free"));
    CHECK(!fs::exists(scratch / "full"));
  }
}

TEST_CASE("--max-output none still checks the exact output against the free space") {
  ScratchDir scratch;
  const std::string npy = embeddings_npy(scratch, 100, 8);
  FakeFreeSpace free(1 << 20);  // the margin alone is 1 MiB + 1 KiB: nothing fits
  const auto refused = run_cli({"pack", npy, "-o", scratch / "ds", "-q", "--max-output", "none"});
  check_one_line(refused);
  CHECK(contains(refused.err, "100 rows make"));  // the exact check, after validation
  CHECK(!fs::exists(scratch / "ds"));
}

TEST_CASE("appending checks the new shards against the cap") {
  ScratchDir scratch;
  const std::string npy = embeddings_npy(scratch, 500, 16);
  const std::string out = scratch / "ds";
  REQUIRE(run_cli({"pack", npy, "-o", out, "-q"}).exit_code == 0);
  const auto manifest_before = test_support::read_bytes(out + "/manifest.json");
  const auto refused = run_cli({"pack", npy, "--append", out, "-q", "--max-output", "4K"});
  check_one_line(refused);
  CHECK(contains(refused.err, "--max-output"));
  CHECK(test_support::read_bytes(out + "/manifest.json") == manifest_before);
  CHECK(!fs::exists(out + "/shard-00001.gcs"));
}

TEST_CASE("merge --copy checks the copied bytes against the free space") {
  ScratchDir scratch;
  const std::string npy = embeddings_npy(scratch, 800, 16);
  for (const char* part : {"0/2", "1/2"})
    REQUIRE(run_cli({"pack", npy, "-o", scratch / ("part" + std::string(1, part[0])), "-q",
                     "--part", part})
                .exit_code == 0);
  FakeFreeSpace free(0);
  // Hard links take no space: a merge on one file system is never refused for it.
  CHECK(run_cli({"merge", scratch / "part0", scratch / "part1", "-o", scratch / "linked"})
            .exit_code == 0);
}
