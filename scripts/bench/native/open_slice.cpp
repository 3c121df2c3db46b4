// How long a rank takes to open its slice of a dataset of many shards: writes a dataset of N
// one-row shards (as pack would lay them out, with the manifest listing them), then times
// Dataset::open + select_rows(0, 1) + to_host, the work under gpucache.load(path, rows=(0, 1)).
// Usage: gpucache_bench_open_slice DIR SHARDS [REPEATS]; prints one JSON line.
// scripts/bench/open_slice.sh runs it for 10, 10,000 and 100,000 shards (docs/benchmarks.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gpucache/runtime.hpp"
#include "tests/runtime_test_shards.hpp"

namespace fs = std::filesystem;
using namespace gpucache;

namespace {

void write_many_shards(const fs::path& dir, std::uint32_t shards) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<test::TestColumn> columns{test::f32_column("embedding", shards, 16)};
  test::ShardOptions options;
  options.shard_count = shards;
  options.dataset_rows = shards;
  shard::Manifest manifest;
  manifest.tool_version = "bench";
  for (std::uint32_t k = 0; k < shards; ++k) {
    const auto bytes = test::build_shard(k, k, 1, columns, options);
    test::write_bytes((dir / test::shard_name(k)).string(), bytes);
    const auto layout = shard::decode_layout(bytes, test::shard_name(k));
    if (k == 0)
      for (const auto& column : layout.columns) manifest.columns.push_back(column);
    manifest.shards.push_back({test::shard_name(k), 1, k, static_cast<std::uint64_t>(bytes.size()),
                               layout.header.header_hash});
  }
  manifest.rows = shards;
  manifest.options = {{"compress", "none"}};
  std::ofstream(dir / "manifest.json") << shard::manifest_to_text(manifest);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s DIR SHARDS [REPEATS]\n", argv[0]);
    return 2;
  }
  const fs::path dir = argv[1];
  const auto shards = static_cast<std::uint32_t>(std::stoul(argv[2]));
  const int repeats = argc > 3 ? std::stoi(argv[3]) : 5;
  bool hash_ok = false;
  const bool reuse =
      fs::exists(dir / "manifest.json") &&
      shard::read_manifest((dir / "manifest.json").string(), hash_ok).shards.size() == shards;
  if (!reuse) write_many_shards(dir, shards);
  std::vector<double> seconds;
  for (int r = 0; r < repeats + 1; ++r) {  // the first run warms the page cache
    const auto start = std::chrono::steady_clock::now();
    const auto slice = runtime::Dataset::open(dir.string()).select_rows(0, 1).to_host();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (slice.rows() != 1) return 1;
    if (r > 0) seconds.push_back(took.count());
  }
  std::sort(seconds.begin(), seconds.end());
  std::printf("{\"shards\": %u, \"manifest_bytes\": %ju, \"open_one_row_s\": %.6f}\n", shards,
              static_cast<std::uintmax_t>(fs::file_size(dir / "manifest.json")),
              seconds[seconds.size() / 2]);
  return 0;
}
