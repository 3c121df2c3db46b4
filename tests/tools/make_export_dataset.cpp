// Writes the dataset of tests/export_test_dataset.hpp (a column of every kind export handles) for
// the Python tests, since `gpucache pack` does not write images, sequences or dense rows yet.
//   gpucache_make_export_dataset OUT_DIR ROWS SHARD_ROWS [ZSTD_LEVEL]
#include <cstdio>
#include <string>

#include "export_test_dataset.hpp"
#include "gpucache/error.hpp"

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s OUT_DIR ROWS SHARD_ROWS [ZSTD_LEVEL]\n", argv[0]);
    return 2;
  }
  try {
    const std::uint64_t rows = std::stoull(argv[2]), shard_rows = std::stoull(argv[3]);
    if (shard_rows == 0) throw gpucache::Error("", "SHARD_ROWS", "must be at least 1");
    gpucache::test::export_dataset::write(argv[1], rows, shard_rows,
                                          argc == 5 ? std::stoi(argv[4]) : 0);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpucache_make_export_dataset: %s\n", error.what());
    return 1;
  }
}
