#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "gpucache/error.hpp"
#include "gpucache/npy.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/shard/shard_layout.hpp"
#include "gpucache/verify.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

namespace {

// A small dataset of two shards: 20 rows of dim 10 (padded to 16) per shard.
std::string make_dataset(const test_support::ScratchDir& scratch, int zstd_level = 0) {
  std::mt19937 random(7);
  std::normal_distribution<float> normal;
  write_npy(scratch / "in.npy", DType::f32, {40, 10},
            [&](std::span<std::byte> out, std::uint64_t, std::uint64_t) {
              auto* values = reinterpret_cast<float*>(out.data());
              for (std::size_t i = 0; i < out.size() / 4; ++i) values[i] = normal(random);
            });
  PackOptions options;
  options.inputs = {scratch / "in.npy"};
  options.output_dir = scratch / "ds";
  options.shard_rows = 20;
  options.zstd_level = zstd_level;
  pack(options);
  return scratch / "ds";
}

std::string all_text(const VerifyReport& report) {
  return report.to_text();
}

}  // namespace

TEST_CASE("an intact dataset verifies") {
  test_support::ScratchDir scratch;
  const auto report = verify(make_dataset(scratch));
  CHECK(report.ok());
  CHECK(report.shards_checked == 2);
}

TEST_CASE("every single flipped byte anywhere in a shard is found and located") {
  test_support::ScratchDir scratch;
  const auto dataset = make_dataset(scratch);
  const std::string shard = dataset + "/shard-00001.gcs";
  const auto original = test_support::read_bytes(shard);
  // Header, column table and the tail (chunk table, footer) byte by byte; the gaps, data and row
  // padding at a stride that still hits every row and every region.
  auto next = [&](std::uint64_t at) -> std::uint64_t {
    return at < 1024 || at + 256 >= original.size() ? at + 1 : at + 37;
  };
  for (std::uint64_t at = 0; at < original.size(); at = next(at)) {
    auto corrupted = original;
    corrupted[at] = static_cast<char>(corrupted[at] ^ 0x40);
    test_support::write_bytes(shard, corrupted);
    const auto report = verify(dataset, {.threads = 1});
    CAPTURE(at);
    REQUIRE_FALSE(report.ok());
    CHECK(report.problems.front().file == "shard-00001.gcs");
  }
  test_support::write_bytes(shard, original);
  CHECK(verify(dataset).ok());
}

TEST_CASE("a flipped data byte is reported with its column, rows and byte range") {
  test_support::ScratchDir scratch;
  const auto dataset = make_dataset(scratch);
  // Row 3 of 'embedding' (pitch 64 bytes) starts at data offset 4096 + 192.
  test_support::flip_byte(dataset + "/shard-00000.gcs", 4096 + 3 * 64 + 5);
  const auto report = verify(dataset);
  REQUIRE(report.problems.size() == 1);
  CHECK(report.problems[0].location.find("column 'embedding' rows") != std::string::npos);
  CHECK(report.problems[0].cause.find("hash mismatch") != std::string::npos);
  REQUIRE(report.problems[0].byte_begin.has_value());
  CHECK(*report.problems[0].byte_begin == 4096);
}

TEST_CASE("a non-zero padding byte is pinpointed") {
  test_support::ScratchDir scratch;
  const auto dataset = make_dataset(scratch);
  const std::uint64_t at = 4096 + 2 * 64 + 10 * 4 + 1;  // row 2, element 10 is padding
  test_support::flip_byte(dataset + "/shard-00000.gcs", at);
  const auto report = verify(dataset);
  REQUIRE(report.problems.size() == 1);
  CHECK(report.problems[0].location == "column 'embedding' row 2 padding");
  CHECK(*report.problems[0].byte_begin == at);
}

TEST_CASE("truncated, extended, missing, extra and swapped shards are all reported") {
  test_support::ScratchDir scratch;
  const auto dataset = make_dataset(scratch);
  const std::string first = dataset + "/shard-00000.gcs", second = dataset + "/shard-00001.gcs";
  const auto bytes = test_support::read_bytes(first);

  SUBCASE("truncated") {
    test_support::write_bytes(first, {bytes.begin(), bytes.end() - 100});
    CHECK(all_text(verify(dataset)).find("truncated") != std::string::npos);
  }
  SUBCASE("extended") {
    auto longer = bytes;
    longer.insert(longer.end(), 10, 0);
    test_support::write_bytes(first, longer);
    CHECK(all_text(verify(dataset)).find("extended") != std::string::npos);
  }
  SUBCASE("missing") {
    fs::remove(second);
    CHECK(all_text(verify(dataset)).find("missing") != std::string::npos);
  }
  SUBCASE("extra") {
    fs::copy_file(first, dataset + "/shard-00002.gcs");
    CHECK(all_text(verify(dataset)).find("extra shard") != std::string::npos);
  }
  SUBCASE("swapped") {
    fs::rename(first, dataset + "/x");
    fs::rename(second, first);
    fs::rename(dataset + "/x", second);
    const auto report = verify(dataset);
    CHECK_FALSE(report.ok());
    CHECK(all_text(report).find("swapped") != std::string::npos);
  }
  SUBCASE("manifest edited") {
    auto manifest = test_support::read_bytes(dataset + "/manifest.json");
    std::string text(manifest.begin(), manifest.end());
    text.replace(text.find("\"version\": \"0.1.0\""), 18, "\"version\": \"9.9.9\"");
    test_support::write_bytes(dataset + "/manifest.json", {text.begin(), text.end()});
    CHECK(all_text(verify(dataset)).find("edited") != std::string::npos);
  }
  SUBCASE("manifest missing") {
    fs::remove(dataset + "/manifest.json");
    CHECK(all_text(verify(dataset)).find("incomplete") != std::string::npos);
  }
  SUBCASE("leftover temporary") {
    test_support::write_bytes(dataset + "/shard-00002.gcs.tmp", {'x'});
    CHECK(all_text(verify(dataset)).find("interrupted") != std::string::npos);
  }
}

TEST_CASE("a compressed dataset verifies, and corruption inside a zstd frame is caught") {
  test_support::ScratchDir scratch;
  const auto dataset = make_dataset(scratch, 3);
  CHECK(verify(dataset).ok());
  test_support::flip_byte(dataset + "/shard-00000.gcs", 4096 + 40);
  CHECK_FALSE(verify(dataset).ok());
}

TEST_CASE("a single shard file can be verified on its own") {
  test_support::ScratchDir scratch;
  const auto dataset = make_dataset(scratch);
  CHECK(verify(dataset + "/shard-00001.gcs").ok());
  CHECK_THROWS_AS(verify(scratch / "nope"), Error);
}
