// Packing columns that live in memory (PackOptions::memory_columns, what gpucache.pack hands over
// for arrays, tensors and lists): read where they lie, checked like a file's columns, recorded as
// "memory:NAME" with the XXH3 of their bytes; and pack's progress, which counts input bytes once.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpucache/common/hash.hpp"
#include "gpucache/error.hpp"
#include "gpucache/memory_input.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/shard/dataset_files.hpp"
#include "gpucache/shard_io/shard_reader.hpp"
#include "pack_test_support.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

namespace {

struct Table {
  std::vector<float> embedding;
  std::vector<std::int64_t> token_offsets{0, 2, 2, 5, 6};
  std::vector<std::int32_t> tokens{1, 2, 3, 4, 5, 6};
  std::vector<std::int64_t> text_offsets{0, 2, 5, 5, 10};
  std::string text = "hiyesnon\xC3\xA9";  // "hi", "yes", "", "non" + e-acute (UTF-8)

  Table() {
    for (int row = 0; row < 4; ++row)
      for (int d = 0; d < 8; ++d) embedding.push_back(static_cast<float>(row + 1) * 0.25f + d);
    embedding[2 * 8 + 3] = std::nanf("");  // row 2 is dropped
  }

  std::vector<MemoryColumn> columns() const {
    MemoryColumn vectors{
        "embedding", ColumnKind::tensor, DType::f32, 4, {8}, std::as_bytes(std::span(embedding)),
        {}};
    MemoryColumn sequence{
        "tokens",     ColumnKind::sequence, DType::i32, 4, {}, std::as_bytes(std::span(tokens)),
        token_offsets};
    MemoryColumn words{"text",      ColumnKind::text,
                       DType::u8,   4,
                       {},          std::as_bytes(std::span(text.data(), text.size())),
                       text_offsets};
    return {vectors, sequence, words};
  }
};

}  // namespace

TEST_CASE("columns in memory pack with the checks, provenance and progress of files") {
  test_support::ScratchDir scratch;
  const Table table;
  PackOptions options;
  options.memory_columns = table.columns();
  options.output_dir = scratch / "ds";
  options.validation.device = Device::cpu;
  std::uint64_t last_done = 0, last_total = 0, calls = 0;
  options.progress_callback = [&](std::uint64_t done, std::uint64_t total) {
    CHECK(done <= total);
    last_done = done;
    last_total = total;
    ++calls;
  };
  const PackResult result = pack(options);
  CHECK(result.input_rows == 4);
  CHECK(result.rows == 3);
  CHECK(result.device == "cpu");
  CHECK(result.device_reason == "--device cpu");
  const std::uint64_t input_bytes = table.embedding.size() * 4 + table.tokens.size() * 4 +
                                    table.token_offsets.size() * 8 + table.text.size() +
                                    table.text_offsets.size() * 8;
  CHECK(calls >= 1);
  CHECK(last_total == input_bytes);  // once, not twice
  CHECK(last_done == input_bytes);

  const auto manifest = test_support::manifest_json(options.output_dir);
  REQUIRE(manifest["inputs"].size() == 3);
  CHECK(manifest["inputs"][0]["path"] == "memory:embedding");
  CHECK(manifest["inputs"][0]["bytes"] == table.embedding.size() * 4);
  CHECK(manifest["inputs"][0]["xxh3"] ==
        detail::hex64(detail::xxh3_64(std::as_bytes(std::span(table.embedding)))));
  CHECK(manifest["inputs"][2]["path"] == "memory:text");

  shard::ShardReader reader(options.output_dir + "/" + shard::shard_file_name(0));
  const std::size_t text = *reader.find_column("text");
  CHECK(reader.text(text, 0) == "hi");
  CHECK(reader.text(text, 1) == "yes");
  CHECK(reader.text(text, 2) == "non\xC3\xA9");  // row 2 (the NaN one) dropped
}

TEST_CASE("a file's progress total is its size") {
  test_support::ScratchDir scratch;
  PackOptions options;
  options.inputs = {test_support::data_path("npy/f32_c.npy")};
  options.output_dir = scratch / "ds";
  std::uint64_t last_done = 0, last_total = 0;
  options.progress_callback = [&](std::uint64_t done, std::uint64_t total) {
    last_done = done;
    last_total = total;
  };
  pack(options);
  CHECK(last_total == fs::file_size(options.inputs.front()));
  CHECK(last_done == last_total);
}

TEST_CASE("columns in memory are checked before anything is read") {
  Table table;
  auto expect = [](std::vector<MemoryColumn> columns, const std::string& part) {
    CAPTURE(part);
    try {
      memory_input(columns);
      FAIL("no error");
    } catch (const Error& error) {
      CHECK(std::string(error.what()).find(part) != std::string::npos);
    }
  };
  auto columns = table.columns();
  columns[0].rows = 5;  // 5 rows of 8 f32 need more bytes than there are
  expect(columns, "memory:embedding: data: holds 128 bytes, not the 160");

  table.token_offsets = {0, 2, 1, 5, 6};
  expect(table.columns(), "memory:tokens: offsets[2]: is 1, less than offsets[1]");
  table.token_offsets = {0, 2, 2, 5, 7};
  expect(table.columns(), "memory:tokens: offsets[4]: is 7 but the values hold 6");
  table.token_offsets = {0, 2, 2, 5, 6};
  table.text[6] = '\xC3';  // "non" becomes "n\xC3n": a lead byte without its continuation
  expect(table.columns(), "memory:text: row 3: is not valid UTF-8");

  PackOptions options;
  options.memory_columns = Table().columns();
  options.inputs = {"x.npy"};
  options.output_dir = "unused";
  CHECK_THROWS_WITH_AS(pack(options), doctest::Contains("packed on their own"), UsageError);
}
