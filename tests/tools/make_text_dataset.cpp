// Writes a small dataset with a text column for the Python tests, which otherwise pack real .npy
// files with the gpucache CLI: `gpucache pack` has no input format with text yet.
//   gpucache_make_text_dataset OUT_DIR ROWS SHARD_ROWS
// Columns: emb (f32, dim 3, row r = [r*1000, r*1000+1, r*1000+2]), label (i64, 7r-3) and caption
// (text: "row r ✓", empty when r % 5 == 3). manifest.json lists every shard with its header hash.
#include <cstdio>
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
    std::uint32_t index = 0;
    for (std::uint64_t first = 0; first < rows || (rows == 0 && index == 0);
         first += shard_rows, ++index) {
      const std::uint64_t count = std::min(shard_rows, rows - first);
      test::write_bytes((dir / test::shard_name(index)).string(),
                        test::build_shard(index, first, count, columns, dataset));
    }
    test::write_manifest(dir);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpucache_make_text_dataset: %s\n", error.what());
    return 1;
  }
}
