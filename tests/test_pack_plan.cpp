// Where pack cuts shards (pack/planning/pack_plan.cpp, plan_shards) by the shard writer's one size
// model (shard_io's ShardSizeModel): for several layouts and --shard-size values, every shard the
// plan makes is at most --shard-size by that model, as full as the aligned-rows quantum allows
// (one quantum more would not fit), and the file write() gives it is exactly that size.
#include <doctest/doctest.h>

#include <filesystem>
#include <numeric>

#include "gpucache/shard/shard_layout.hpp"
#include "gpucache/shard_io/shard_writer.hpp"
#include "pack_plan.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

namespace {

std::vector<Column> with_provenance(std::vector<Column> columns) {
  columns.push_back(
      {std::string(shard::kSourceColumn), ColumnKind::tensor, shard::kSourceColumnDType, {}, 1});
  columns.push_back({std::string(shard::kSourceRowColumn),
                     ColumnKind::tensor,
                     shard::kSourceRowColumnDType,
                     {},
                     1});
  return columns;
}

}  // namespace

TEST_CASE("fixed-size rows: every shard is as full as --shard-size and the quantum allow") {
  struct Layout {
    const char* name;
    std::vector<Column> columns;
  };
  const std::vector<Layout> layouts = {
      {"f32 embeddings, 24 wide padded to 32",
       with_provenance({{"emb", ColumnKind::tensor, DType::f32, {24}, 32}})},
      {"f16 embeddings, 10 wide padded to 16",
       with_provenance({{"emb", ColumnKind::tensor, DType::f16, {10}, 16}})},
      {"u8 images 3x5 and i64 labels",
       with_provenance({{"image", ColumnKind::tensor, DType::u8, {3, 5}, 5},
                        {"label", ColumnKind::tensor, DType::i64, {}, 1}})},
      {"wide f32 rows (one row is more than a page)",
       with_provenance({{"emb", ColumnKind::tensor, DType::f32, {1500}, 1504}})},
  };
  const detail::PackInputs no_inputs({});  // fixed-size rows read no input while planning
  for (const auto& layout : layouts) {
    for (const std::uint64_t shard_size : {16ull << 10, 64ull << 10, 1ull << 20, 5ull << 30}) {
      CAPTURE(layout.name);
      CAPTURE(shard_size);
      const std::uint64_t quantum = detail::aligned_rows_quantum(layout.columns);
      shard::ShardSizeModel size_of(layout.columns);
      // Enough rows for a few shards.
      std::uint64_t row_bytes = 0;
      for (const auto& column : layout.columns) row_bytes += column.row_pitch_bytes();
      const std::uint64_t total = 3 * shard_size / row_bytes + 5;
      if (total > (1ull << 22)) continue;  // a row list of this size is too much for a unit test
      std::vector<std::uint64_t> rows(total);
      std::iota(rows.begin(), rows.end(), 0);
      PackOptions options;
      options.shard_size = shard_size;
      const auto plans = detail::plan_shards(layout.columns, no_inputs, rows, options);
      REQUIRE(plans.size() >= 2);
      const std::vector<std::uint64_t> none(layout.columns.size(), 0);
      for (std::size_t k = 0; k + 1 < plans.size(); ++k) {
        // A shard takes at least one row, even one that alone is larger than --shard-size.
        if (size_of.bytes(1, none) > shard_size) {
          CHECK(plans[k].rows == 1);
          continue;
        }
        CHECK(size_of.bytes(plans[k].rows, none) <= shard_size);
        CHECK(size_of.bytes(plans[k].rows + quantum, none) > shard_size);
        if (plans[k].rows >= quantum) CHECK(plans[k].rows % quantum == 0);
      }
    }
  }
}

TEST_CASE("--shard-rows caps the rows; the size still bounds them") {
  const auto columns = with_provenance({{"emb", ColumnKind::tensor, DType::f32, {24}, 32}});
  const detail::PackInputs no_inputs({});
  std::vector<std::uint64_t> rows(10000);
  std::iota(rows.begin(), rows.end(), 0);
  PackOptions options;
  options.shard_rows = 1000;
  CHECK(detail::plan_shards(columns, no_inputs, rows, options).front().rows == 1000);
  options.shard_size = 64 << 10;  // far fewer than 1000 rows fit
  const auto plans = detail::plan_shards(columns, no_inputs, rows, options);
  shard::ShardSizeModel size_of(columns);
  CHECK(plans.front().rows < 1000);
  CHECK(size_of.bytes(plans.front().rows, {}) <= options.shard_size);
  CHECK(size_of.bytes(plans.front().rows + 1, {}) > options.shard_size);
  options.shard_size = 1;  // nothing fits: a shard still takes one row
  CHECK(detail::plan_shards(columns, no_inputs, rows, options).front().rows == 1);
}

TEST_CASE("the planned size is the size write() gives the shard") {
  test_support::ScratchDir scratch;
  const std::vector<std::vector<Column>> layouts = {
      with_provenance({{"emb", ColumnKind::tensor, DType::f32, {24}, 32}}),
      with_provenance({{"image", ColumnKind::tensor, DType::u8, {3, 5}, 5},
                       {"text", ColumnKind::text, DType::u8, {}, 1},
                       {"tokens", ColumnKind::sequence, DType::i64, {}, 0}}),
  };
  for (const auto& columns : layouts) {
    shard::ShardSizeModel size_of(columns);
    for (const std::uint64_t rows : {1ull, 128ull, 1000ull, 20000ull}) {
      CAPTURE(rows);
      std::vector<std::uint64_t> value_bytes(columns.size(), 0);
      for (std::size_t c = 0; c < columns.size(); ++c)
        if (columns[c].variable_length())
          value_bytes[c] = rows * (columns[c].kind == ColumnKind::text ? 11 : 3 * 8);
      const std::string path = scratch / "shard.gcs";
      shard::ShardBuilder builder(columns, rows, value_bytes);
      const auto written = builder.write(path, {});
      CHECK(fs::file_size(path) == size_of.bytes(rows, value_bytes));
      CHECK(written.bytes == size_of.bytes(rows, value_bytes));
    }
  }
}
