// The text forms of pack's options (src/pack/pack_option_text.cpp), which the CLI and the Python
// API both go through: sizes, --max-output, --compress, --part and --split.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "gpucache/error.hpp"
#include "gpucache/pack.hpp"

using namespace gpucache;

namespace {

std::string usage_error(auto&& call) {
  try {
    call();
  } catch (const UsageError& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("sizes take K, M, G and T (binary), with or without B or iB") {
  CHECK(parse_byte_size("4096", "--shard-size") == 4096);
  CHECK(parse_byte_size("512M", "--shard-size") == 512ull << 20);
  CHECK(parse_byte_size("1G", "--shard-size") == 1ull << 30);
  CHECK(parse_byte_size("1GiB", "--shard-size") == 1ull << 30);
  CHECK(parse_byte_size("2gb", "--shard-size") == 2ull << 30);
  CHECK(parse_byte_size("1.5K", "--shard-size") == 1536);
  CHECK(parse_byte_size("16T", "--max-output") == 16ull << 40);
}

TEST_CASE("a size that is not positive, not a number, of an unknown unit or beyond 16 EiB") {
  CHECK(usage_error([] { parse_byte_size("0", "--shard-size"); }).find("positive") !=
        std::string::npos);
  CHECK(usage_error([] { parse_byte_size("-1G", "--shard-size"); }).find("positive") !=
        std::string::npos);
  CHECK(usage_error([] { parse_byte_size("nan", "--shard-size"); }).find("positive") !=
        std::string::npos);
  CHECK(usage_error([] { parse_byte_size("big", "--shard-size"); }).find("not a size") !=
        std::string::npos);
  CHECK(usage_error([] { parse_byte_size("3Q", "--shard-size"); }).find("unknown unit") !=
        std::string::npos);
  // Converting 1e30 TiB to an integer would be undefined: it is refused by name instead.
  CHECK(usage_error([] { parse_byte_size("1e30T", "--max-output"); }).find("16 EiB") !=
        std::string::npos);
  CHECK(usage_error([] { parse_byte_size("inf", "--max-output"); }).find("16 EiB") !=
        std::string::npos);
  CHECK(usage_error([] { parse_byte_size("15E", "--max-output"); }).find("unknown unit") !=
        std::string::npos);
}

TEST_CASE("--max-output none means no cap; --compress zstd[:LEVEL]") {
  CHECK(parse_max_output("none") == UINT64_MAX);
  CHECK(parse_max_output("2T") == 2ull << 40);
  CHECK(parse_compression("none") == 0);
  CHECK(parse_compression("zstd") == 3);
  CHECK(parse_compression("zstd:19") == 19);
  CHECK(usage_error([] { parse_compression("zstd:0"); }).find("1 to 22") != std::string::npos);
  CHECK(usage_error([] { parse_compression("gzip"); }).find("zstd") != std::string::npos);
}

TEST_CASE("--part K/N and --split NAME=FRACTION,...") {
  const PartSpec part = parse_part_spec("3/8");
  CHECK(part.index == 3);
  CHECK(part.count == 8);
  for (const char* bad : {"8/8", "1/0", "a/2", "1/", "/2", "1-2", "-1/2", "1234567890/9"}) {
    CAPTURE(bad);
    CHECK(usage_error([&] { parse_part_spec(bad); }).find("expected K/N") != std::string::npos);
  }
  const auto splits = parse_split_spec("train=0.9,val=0.1");
  REQUIRE(splits.size() == 2);
  CHECK(splits[0].name == "train");
  CHECK(splits[1].fraction == doctest::Approx(0.1));
  CHECK(usage_error([] { parse_split_spec("train"); }).find("NAME=FRACTION") != std::string::npos);
  CHECK(usage_error([] { parse_split_spec("train=x"); }).find("not a number") != std::string::npos);
  CHECK(usage_error([] { parse_split_spec("../up=1"); }).find("names a folder") !=
        std::string::npos);
}
