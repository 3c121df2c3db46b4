// The shard module's data rules (gpucache/shard/chunks.hpp): chunk ranges, the chunk hash check
// and its error, what a byte range holds, and the text offsets rule.
#include <doctest/doctest.h>

#include <cstring>

#include "gpucache/common/hash.hpp"
#include "gpucache/shard/chunks.hpp"
#include "runtime_test_shards.hpp"

using namespace gpucache;
using namespace gpucache::shard;

namespace {

// 100 rows of a [3] f32 column (pitch 64 bytes) and a text column, in 8 KiB chunks.
struct Sample {
  std::vector<std::byte> file;
  Layout layout;
};

Sample sample() {
  Sample s;
  s.file = test::build_shard(0, 0, 100,
                             {test::f32_column("emb", 100, 3), test::text_column("caption", 100)});
  s.layout = decode_layout(s.file, "s.gcs");
  return s;
}

std::vector<std::byte> offsets_of(const std::vector<std::uint64_t>& values) {
  std::vector<std::byte> bytes(values.size() * 8);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

}  // namespace

TEST_CASE("chunk ranges cover the data region, and chunks_touching finds the chunks of ranges") {
  const Sample s = sample();
  const Header& h = s.layout.header;
  REQUIRE(h.chunk_count >= 2);
  CHECK(chunk_range(h, 0).begin == h.data_offset);
  CHECK(chunk_range(h, h.chunk_count - 1).end == h.data_offset + h.data_size);
  const auto touched =
      chunks_touching(h, {{h.data_offset + 10, h.data_offset + 20},
                          {h.data_offset + h.chunk_size - 1, h.data_offset + h.chunk_size + 1},
                          {h.data_offset + 5, h.data_offset + 5}});
  CHECK(touched == std::vector<std::uint64_t>{0, 1});
}

TEST_CASE("every chunk of an intact shard hashes as recorded; a flipped byte is named") {
  Sample s = sample();
  for (std::uint64_t k = 0; k < s.layout.header.chunk_count; ++k) {
    CHECK(chunk_hash(s.file, s.layout, k, "s.gcs") == s.layout.chunks[k].hash);
    const ByteRange range = chunk_range(s.layout.header, k);
    CHECK_NOTHROW(check_chunk_hash({s.file.data() + range.begin, range.end - range.begin}, s.layout,
                                   k, "s.gcs"));
  }
  const ByteRange first = chunk_range(s.layout.header, 0);
  s.file[first.begin + 64 * 2 + 4] ^= std::byte{1};  // row 2 of 'emb'
  try {
    check_chunk_hash({s.file.data() + first.begin, first.end - first.begin}, s.layout, 0, "s.gcs");
    FAIL("no error");
  } catch (const Error& error) {
    const std::string text = error.what();
    CHECK(text.find("s.gcs: chunk 0, bytes " + std::to_string(first.begin)) == 0);
    CHECK(text.find("column 'emb' rows 0-") != std::string::npos);
    CHECK(text.find("chunk hash mismatch (stored " + detail::hex64(s.layout.chunks[0].hash)) !=
          std::string::npos);
  }
}

TEST_CASE("describe_range names columns, rows, offsets, text bytes and padding") {
  const Sample s = sample();
  const ColumnEntry& emb = s.layout.columns[0];
  const ColumnEntry& caption = s.layout.columns[1];
  CHECK(describe_range(s.layout, {emb.data_offset + 64, emb.data_offset + 192}) ==
        "column 'emb' rows 1-2");
  CHECK(describe_range(s.layout, {caption.data_offset, caption.data_offset + 8}) ==
        "column 'caption' offsets");
  CHECK(describe_range(s.layout, {caption.aux_offset, caption.aux_offset + 1}) ==
        "column 'caption' text bytes");
  CHECK(describe_range(s.layout, {emb.data_offset + emb.data_size,
                                  emb.data_offset + emb.data_size + 1}) == "alignment padding");
}

TEST_CASE("text offsets must start at 0, never decrease and end at the text size") {
  const auto good = offsets_of({0, 3, 3, 9});
  CHECK_FALSE(find_bad_offset(good.data(), 3, 9, true).has_value());
  CHECK(find_bad_offset(offsets_of({1, 3, 3, 9}).data(), 3, 9, true) == 0u);
  CHECK(find_bad_offset(offsets_of({0, 4, 3, 9}).data(), 3, 9, true) == 2u);
  CHECK(find_bad_offset(offsets_of({0, 3, 3, 8}).data(), 3, 9, true) == 3u);
  CHECK(find_bad_offset(offsets_of({0, 3, 10, 9}).data(), 3, 9, true) == 2u);
  // A run of rows inside a column need not start at 0 or end at the text size.
  CHECK_FALSE(find_bad_offset(offsets_of({3, 3, 8}).data(), 2, 9, false).has_value());
  CHECK(find_bad_offset(offsets_of({3, 2, 8}).data(), 2, 9, false) == 1u);
  const Sample s = sample();
  const Error error = bad_offset_error("s.gcs", s.layout.columns[1], 10, 2, 4096);
  CHECK(std::string(error.what()) ==
        "s.gcs: column 'caption' row 12, bytes 4096-4103: text offsets are not monotonic or do "
        "not end at the " +
            std::to_string(s.layout.columns[1].aux_size) + " text bytes: the shard is corrupt");
}
