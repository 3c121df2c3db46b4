// Runs every fuzz target (fuzz/targets.hpp) over its committed seed corpus and over the inputs
// that once broke it (fuzz/regressions/<target>/), in every build: the plain one, the sanitizer
// build in CI, any compiler. A target either accepts or cleanly refuses each input; a crash, a
// sanitizer report, a broken invariant (trap) or any exception but gpucache::Error fails here.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "fuzz/targets.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kFuzzRoot = fs::path(GPUCACHE_TEST_DATA).parent_path().parent_path() / "fuzz";

// Replays every file in fuzz/corpus/<name> and fuzz/regressions/<name>; returns how many ran.
std::size_t replay(const std::string& name,
                   const std::function<void(std::span<const std::byte>)>& target) {
  std::size_t count = 0;
  for (const char* folder : {"corpus", "regressions"}) {
    const fs::path dir = kFuzzRoot / folder / name;
    if (!fs::is_directory(dir)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      const auto bytes = test_support::read_bytes(file.string());
      INFO("input: " << file.string());
      CHECK_NOTHROW(target(std::as_bytes(std::span(bytes.data(), bytes.size()))));
      ++count;
    }
  }
  return count;
}

}  // namespace

TEST_CASE("fuzz corpus and regressions: shard header and tables") {
  CHECK(replay("shard_layout", gpucache::fuzz::shard_layout) >= 5);
}

TEST_CASE("fuzz corpus and regressions: manifest.json") {
  CHECK(replay("manifest", gpucache::fuzz::manifest) >= 3);
}

TEST_CASE("fuzz corpus and regressions: .npy") {
  CHECK(replay("npy", gpucache::fuzz::npy) >= 10);
}

TEST_CASE("fuzz corpus and regressions: .npz") {
  CHECK(replay("npz", gpucache::fuzz::npz) >= 4);
}

TEST_CASE("fuzz corpus and regressions: zip container") {
  CHECK(replay("zip", gpucache::fuzz::zip) >= 10);
}

TEST_CASE("fuzz corpus and regressions: pickle machine") {
  CHECK(replay("pickle", gpucache::fuzz::pickle) >= 10);
}

TEST_CASE("fuzz corpus and regressions: torch.save files") {
  CHECK(replay("pt", gpucache::fuzz::pt) >= 10);
}

TEST_CASE("fuzz corpus and regressions: safetensors") {
  CHECK(replay("safetensors", gpucache::fuzz::safetensors) >= 10);
}

TEST_CASE("fuzz corpus and regressions: JSON lines") {
  CHECK(replay("jsonl", gpucache::fuzz::jsonl) >= 10);
}

TEST_CASE("fuzz corpus and regressions: schema field paths") {
  CHECK(replay("field_path", gpucache::fuzz::field_path) >= 10);
}

TEST_CASE("fuzz corpus and regressions: Parquet") {
  // Without libsnappy there is no Parquet reader and the target reads nothing; the files still run.
  CHECK(replay("parquet", gpucache::fuzz::parquet) >= 10);
}

TEST_CASE("fuzz corpus and regressions: Parquet decoders and schemas") {
  // Without the Parquet reader these targets read nothing; the files still run.
  CHECK(replay("parquet_delta_binary_packed", gpucache::fuzz::parquet_delta_binary_packed) >= 3);
  CHECK(replay("parquet_delta_length_byte_array",
               gpucache::fuzz::parquet_delta_length_byte_array) >= 3);
  CHECK(replay("parquet_delta_byte_array", gpucache::fuzz::parquet_delta_byte_array) >= 3);
  CHECK(replay("parquet_brotli", gpucache::fuzz::parquet_brotli) >= 3);
  CHECK(replay("parquet_lz4_hadoop", gpucache::fuzz::parquet_lz4_hadoop) >= 3);
  CHECK(replay("parquet_schema", gpucache::fuzz::parquet_schema) >= 3);
}
