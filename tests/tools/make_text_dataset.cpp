// Writes a small dataset with a text column for the Python tests, which otherwise pack real .npy
// files with the gpucache CLI: `gpucache pack` has no input format with text yet.
//   gpucache_make_text_dataset OUT_DIR ROWS SHARD_ROWS
// Columns: emb (f32, dim 3, row r = [r*1000, r*1000+1, r*1000+2]), label (i64, 7r-3) and caption
// (text: "row r ✓", empty when r % 5 == 3). manifest.json lists every shard with its header hash.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gpucache/error.hpp"
#include "runtime_test_shards.hpp"

using namespace gpucache;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s OUT_DIR ROWS SHARD_ROWS\n", argv[0]);
    return 2;
  }
  try {
    const std::filesystem::path dir = argv[1];
    const std::uint64_t rows = std::stoull(argv[2]), shard_rows = std::stoull(argv[3]);
    if (shard_rows == 0) throw Error("", "SHARD_ROWS", "must be at least 1");
    const std::vector<test::TestColumn> columns{test::f32_column("emb", rows, 3),
                                                test::i64_column("label", rows),
                                                test::text_column("caption", rows)};
    std::filesystem::create_directories(dir);
    test::ShardOptions dataset;
    dataset.shard_count =
        static_cast<std::uint32_t>(rows == 0 ? 1 : (rows + shard_rows - 1) / shard_rows);
    dataset.dataset_rows = rows;
    std::string shards;
    std::uint32_t index = 0;
    for (std::uint64_t first = 0; first < rows || (rows == 0 && index == 0);
         first += shard_rows, ++index) {
      const std::uint64_t count = std::min(shard_rows, rows - first);
      const auto bytes = test::build_shard(index, first, count, columns, dataset);
      test::write_bytes((dir / test::shard_name(index)).string(), bytes);
      std::uint64_t header_hash = 0;
      std::memcpy(&header_hash, bytes.data() + 248, 8);
      char hash[17];
      std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(header_hash));
      shards +=
          std::string(shards.empty() ? "" : ", ") + "{\"file\": \"" + test::shard_name(index) +
          "\", \"rows\": " + std::to_string(count) + ", \"first_row\": " + std::to_string(first) +
          ", \"bytes\": " + std::to_string(bytes.size()) + ", \"header_hash\": \"" + hash + "\"}";
    }
    std::ofstream(dir / "manifest.json")
        << "{\"format\": \"gpucache-dataset\", \"format_version\": 1, \"rows\": " << rows
        << ", \"shards\": [" << shards << "]}\n";
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpucache_make_text_dataset: %s\n", error.what());
    return 1;
  }
}
