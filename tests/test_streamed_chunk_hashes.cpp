#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "gpucache/common/hash.hpp"
#include "gpucache/shard/shard_layout.hpp"
#include "gpucache/shard_io/streamed_chunk_hashes.hpp"

using namespace gpucache::shard;

namespace {

constexpr std::uint64_t kChunk = 1000;

std::vector<std::byte> random_bytes(std::size_t size, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<std::byte> bytes(size);
  for (auto& b : bytes) b = static_cast<std::byte>(random() & 0xff);
  return bytes;
}

std::uint64_t chunk_hash(const std::vector<std::byte>& data, std::uint64_t k) {
  const std::uint64_t begin = k * kChunk;
  return gpucache::detail::xxh3_64(
      std::span(data).subspan(begin, std::min(kChunk, data.size() - begin)));
}

}  // namespace

TEST_CASE("bytes added in order, in pieces of any size, hash every chunk, the short last one too") {
  const auto data = random_bytes(4 * kChunk + 321, 1);
  for (std::uint64_t piece : {1ull, 7ull, 999ull, 1000ull, 1001ull, 5000ull}) {
    CAPTURE(piece);
    StreamedChunkHashes hashes(data.size(), kChunk);
    for (std::uint64_t at = 0; at < data.size(); at += piece)
      hashes.add(at, std::span(data).subspan(at, std::min<std::uint64_t>(piece, data.size() - at)));
    for (std::uint64_t k = 0; k < 5; ++k) {
      CAPTURE(k);
      REQUIRE(hashes.hash(k).has_value());
      CHECK(*hashes.hash(k) == chunk_hash(data, k));
    }
    CHECK_FALSE(hashes.hash(5).has_value());
  }
}

TEST_CASE("a chunk not wholly added in one run of consecutive bytes gets no hash") {
  const auto data = random_bytes(4 * kChunk, 2);
  StreamedChunkHashes hashes(data.size(), kChunk);
  // Starts inside chunk 0 and leaves a gap inside chunk 2.
  hashes.add(10, std::span(data).subspan(10, 2 * kChunk + 100 - 10));
  hashes.add(2 * kChunk + 200, std::span(data).subspan(2 * kChunk + 200, 2 * kChunk - 200));
  CHECK_FALSE(hashes.hash(0).has_value());
  CHECK(hashes.hash(1) == chunk_hash(data, 1));
  CHECK_FALSE(hashes.hash(2).has_value());
  CHECK(hashes.hash(3) == chunk_hash(data, 3));

  // Bytes never added are never hashed; out-of-range adds are ignored.
  StreamedChunkHashes untouched(data.size(), kChunk);
  untouched.add(3 * kChunk, std::span(data).subspan(0, 2 * kChunk));
  untouched.add(0, {});
  for (std::uint64_t k = 0; k < 4; ++k) {
    CHECK_FALSE(untouched.hash(k).has_value());
  }
}

TEST_CASE("bytes added again replace the hash of every chunk they touch") {
  const auto first = random_bytes(3 * kChunk, 3);
  auto second = first;
  for (std::uint64_t at = kChunk + 500; at < kChunk + 600; ++at) second[at] = std::byte{0};
  StreamedChunkHashes hashes(first.size(), kChunk);
  hashes.add(0, first);
  REQUIRE(hashes.hash(1) == chunk_hash(first, 1));

  // Part of chunk 1 again: its old hash is gone and the new bytes alone cannot make a new one.
  hashes.add(kChunk + 500, std::span(second).subspan(kChunk + 500, 100));
  CHECK_FALSE(hashes.hash(1).has_value());
  CHECK(hashes.hash(0) == chunk_hash(first, 0));
  CHECK(hashes.hash(2) == chunk_hash(first, 2));

  // All of it again, out of order: hashed from the final bytes.
  hashes.add(kChunk, std::span(second).subspan(kChunk, kChunk));
  CHECK(hashes.hash(1) == chunk_hash(second, 1));
  CHECK(hashes.hash(1) != chunk_hash(first, 1));
}
