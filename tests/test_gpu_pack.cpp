// On a machine with a GPU: pack with --device cuda writes exactly the bytes --device cpu writes.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "gpucache/npy.hpp"
#include "gpucache/pack.hpp"
#include "test_support.hpp"

using namespace gpucache;

TEST_CASE("cpu and cuda packs are byte-identical, bad rows, dedup, shuffle and f16 included") {
  test_support::ScratchDir scratch;
  const std::uint64_t rows = 50000, dim = 384;
  std::mt19937 random(9);
  std::normal_distribution<float> normal;
  write_npy(scratch / "in.npy", DType::f32, {rows, dim},
            [&](std::span<std::byte> out, std::uint64_t first, std::uint64_t count) {
              auto* values = reinterpret_cast<float*>(out.data());
              for (std::uint64_t i = 0; i < count * dim; ++i) values[i] = normal(random);
              for (std::uint64_t r = 0; r < count; ++r) {
                const std::uint64_t row = first + r;
                if (row % 97 == 0) values[r * dim + 3] = NAN;
                if (row % 89 == 0) std::memset(values + r * dim, 0, dim * 4);
                if (row % 83 == 0 && r > 0)
                  std::memcpy(values + r * dim, values + (r - 1) * dim, dim * 4);
              }
            });
  for (bool shuffle : {false, true}) {
    PackOptions options;
    options.inputs = {scratch / "in.npy"};
    options.dtype = DType::f16;
    options.shard_rows = 7000;
    options.validation.dedup = true;
    options.validation.shuffle = shuffle;
    options.validation.normalize = shuffle;
    options.validation.device = Device::cpu;
    options.output_dir = scratch / "cpu";
    options.force = true;
    pack(options);
    options.validation.device = Device::cuda;
    options.output_dir = scratch / "cuda";
    pack(options);
    for (const auto& entry : std::filesystem::directory_iterator(scratch / "cpu")) {
      const auto name = entry.path().filename().string();
      CAPTURE(name);
      CHECK(test_support::read_bytes(entry.path().string()) ==
            test_support::read_bytes(scratch / ("cuda/" + name)));
    }
  }
}
