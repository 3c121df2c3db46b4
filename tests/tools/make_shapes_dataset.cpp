// Writes a dataset of shard format 1.2 for the Python tests: tensor columns of several row shapes
// and sequence columns, which `gpucache pack` cannot produce yet.
//   gpucache_make_shapes_dataset OUT_DIR ROWS SHARD_ROWS
// Columns (values as tests/runtime_test_shards.hpp defines them; r is the dataset row):
//   image   u8 [3, 4, 5], dense: element e (row-major) of row r is (7r + e) % 251
//   dense   f32 [7], dense (28-byte rows): element j of row r is 1000r + j
//   label   i64 scalar: 7r - 3
//   emb     f32 [3] padded to 16: element j of row r is 1000r + j
//   tokens  i32 sequence: row r has r % 5 values, value k is 100r + k
//   ids     i64 sequence: row r has 3r % 7 values, value k is r * 2^33 + k
//   caption text: "row r ✓", empty when r % 5 == 3
// manifest.json lists every shard with its header hash.
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
    const std::vector<test::TestColumn> columns{test::u8_image_column("image", rows, {3, 4, 5}),
                                                test::dense_f32_column("dense", rows, 7),
                                                test::i64_column("label", rows),
                                                test::f32_column("emb", rows, 3),
                                                test::i32_sequence_column("tokens", rows),
                                                test::i64_sequence_column("ids", rows),
                                                test::text_column("caption", rows)};
    std::vector<std::uint64_t> shards;
    for (std::uint64_t first = 0; first < rows; first += shard_rows)
      shards.push_back(std::min(shard_rows, rows - first));
    if (shards.empty()) shards.push_back(0);
    test::write_dataset(dir, columns, shards);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpucache_make_shapes_dataset: %s\n", error.what());
    return 1;
  }
}
