// The stateless batch order (gpucache/batch_order.hpp): the keyed permutation is a bijection and
// deterministic, epochs and seeds reshuffle, ranks partition each epoch with equal batch counts,
// block mode keeps windows within few blocks, and the C ABI agrees with the C++ API.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "gpucache/batch_order.hpp"
#include "gpucache/gpucache.h"

using namespace gpucache::runtime;

namespace {

std::vector<std::uint64_t> image(std::uint64_t size, std::uint64_t key) {
  const Permutation permutation(size, key);
  std::vector<std::uint64_t> out(size);
  for (std::uint64_t i = 0; i < size; ++i) out[i] = permutation(i);
  return out;
}

bool is_bijection(std::vector<std::uint64_t> values) {
  std::vector<std::uint64_t> expected(values.size());
  std::iota(expected.begin(), expected.end(), 0);
  std::sort(values.begin(), values.end());
  return values == expected;
}

std::vector<std::uint64_t> epoch_rows(const OrderOptions& options) {
  const BatchOrder order(options);
  std::vector<std::uint64_t> rows;
  for (std::uint64_t b = 0; b < order.batches(); ++b)
    for (const std::uint64_t row : order.batch(b)) rows.push_back(row);
  return rows;
}

}  // namespace

TEST_CASE("the permutation is a bijection of [0, n) for every size, including odd bit widths") {
  for (const std::uint64_t size :
       {0ull, 1ull, 2ull, 3ull, 5ull, 7ull, 8ull, 100ull, 1000ull, 4096ull, 4097ull, 65537ull}) {
    CAPTURE(size);
    CHECK(is_bijection(image(size, 42)));
  }
}

TEST_CASE("the permutation depends only on its size and key, and keys give different orders") {
  CHECK(image(1000, 7) == image(1000, 7));
  CHECK(image(1000, 7) != image(1000, 8));
  const auto shuffled = image(1000, order_key(0, 0, 0));
  std::vector<std::uint64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(shuffled != identity);
  // A shuffle moves most rows: fixed points of a random permutation average one.
  std::size_t fixed = 0;
  for (std::size_t i = 0; i < shuffled.size(); ++i) fixed += shuffled[i] == i;
  CHECK(fixed < 10);
  // Pinned values: the Python layer (gpucache/_order.py) must compute exactly these.
  CHECK(order_key(0, 0, 0) == order_key(0, 0, 0));
  CHECK(order_key(0, 1, 0) != order_key(0, 0, 0));
  CHECK(order_key(1, 0, 0) != order_key(0, 0, 0));
}

TEST_CASE("each epoch is a permutation of the rows, reshuffled per epoch and seed") {
  OrderOptions options;
  options.rows = 103;
  options.batch_size = 10;
  options.drop_last = false;
  const auto epoch0 = epoch_rows(options);
  CHECK(epoch0.size() == 103);
  CHECK(is_bijection(epoch0));
  CHECK(epoch_rows(options) == epoch0);
  options.epoch = 1;
  CHECK(epoch_rows(options) != epoch0);
  options.epoch = 0;
  options.seed = 1;
  CHECK(epoch_rows(options) != epoch0);
  options.shuffle = false;
  const auto sequential = epoch_rows(options);
  CHECK(std::is_sorted(sequential.begin(), sequential.end()));
  options.drop_last = true;
  CHECK(BatchOrder(options).batches() == 10);
  CHECK(epoch_rows(options).size() == 100);
}

TEST_CASE("ranks split every epoch into disjoint parts with equal batch counts") {
  for (const bool drop_last : {true, false}) {
    CAPTURE(drop_last);
    OrderOptions options;
    options.rows = 103;
    options.batch_size = 4;
    options.world_size = 4;
    options.drop_last = drop_last;
    options.epoch = 3;
    std::vector<std::uint64_t> all;
    std::set<std::uint64_t> batch_counts;
    std::vector<std::vector<std::uint64_t>> per_rank;
    for (std::uint32_t rank = 0; rank < 4; ++rank) {
      options.rank = rank;
      const BatchOrder order(options);
      batch_counts.insert(order.batches());
      per_rank.push_back(epoch_rows(options));
      all.insert(all.end(), per_rank.back().begin(), per_rank.back().end());
    }
    CHECK(batch_counts.size() == 1);
    if (drop_last) {
      CHECK(*batch_counts.begin() == 6);  // 25 rows per rank, batches of 4
      std::set<std::uint64_t> distinct(all.begin(), all.end());
      CHECK(distinct.size() == all.size());  // no row on two ranks
    } else {
      CHECK(*batch_counts.begin() == 7);  // 26 rows per rank: 1 padded
      std::set<std::uint64_t> distinct(all.begin(), all.end());
      CHECK(distinct.size() == 103);  // every row, one repeated
      CHECK(all.size() == 104);
    }
    // The rank's rows interleave the one-rank epoch order (DistributedSampler's layout), so the
    // global order is the same whatever the world size: ranks reshuffle globally every epoch.
    OrderOptions single = options;
    single.rank = 0;
    single.world_size = 1;
    single.batch_size = 1;
    single.drop_last = false;
    const auto global = epoch_rows(single);
    for (std::uint32_t rank = 0; rank < 4; ++rank)
      for (std::size_t j = 0; j < per_rank[rank].size(); ++j)
        CHECK(per_rank[rank][j] == global[(j * 4 + rank) % 103]);
  }
}

TEST_CASE("without padding ranks take every row exactly once") {
  for (const std::uint64_t rows : {0ull, 1ull, 2ull, 103ull, 1000ull}) {
    for (const std::uint32_t world : {1u, 2u, 3u, 7u}) {
      CAPTURE(rows);
      CAPTURE(world);
      std::vector<std::uint64_t> seen;
      for (std::uint32_t rank = 0; rank < world; ++rank) {
        OrderOptions options;
        options.rows = rows;
        options.batch_size = 8;
        options.seed = 5;
        options.rank = rank;
        options.world_size = world;
        options.drop_last = false;
        options.pad = false;
        const BatchOrder order(options);
        // Positions rank, rank + world, ... below rows: rows / world, or one more.
        CHECK(order.rank_rows() == rows / world + (rank < rows % world ? 1 : 0));
        for (std::uint64_t b = 0; b < order.batches(); ++b) {
          const auto batch = order.batch(b);
          seen.insert(seen.end(), batch.begin(), batch.end());
        }
      }
      std::sort(seen.begin(), seen.end());
      std::vector<std::uint64_t> expected(rows);
      std::iota(expected.begin(), expected.end(), 0);
      CHECK(seen == expected);
    }
  }
}

TEST_CASE("resume_batch rounds the saved global progress down to a whole batch of the new ranks") {
  CHECK(resume_batch(4, 5, 2, 5, 1) == 8);   // 40 positions
  CHECK(resume_batch(4, 5, 2, 3, 1) == 13);  // 40 positions, 39 of them in 13 batches of 3
  CHECK(resume_batch(7, 3, 1, 4, 2) == 2);   // 21 positions, batches of 8 across two ranks
  CHECK(resume_batch(0, 9, 9, 1, 1) == 0);
  CHECK_THROWS_AS(resume_batch(1, 1, 1, 0, 1), gpucache::Error);
  CHECK_THROWS_AS(resume_batch(1, 1, 1, 1, 0), gpucache::Error);
}

TEST_CASE("a batch comes from its index alone") {
  OrderOptions options;
  options.rows = 5000;
  options.batch_size = 64;
  options.seed = 9;
  options.epoch = 2;
  const BatchOrder order(options);
  const auto whole = epoch_rows(options);
  const auto batch = BatchOrder(options).batch(17);
  CHECK(std::equal(batch.begin(), batch.end(), whole.begin() + 17 * 64));
  CHECK_THROWS(order.batch(order.batches()));
}

TEST_CASE("block mode: a permutation whose windows touch only window_blocks blocks") {
  OrderOptions options;
  options.rows = 1000;  // 15 full blocks of 64 and a tail of 40
  options.batch_size = 1;
  options.drop_last = false;
  options.block_rows = 64;
  options.window_blocks = 4;
  const auto rows = epoch_rows(options);
  CHECK(is_bijection(rows));
  for (std::size_t start = 0; start < 768; start += 256) {
    std::set<std::uint64_t> blocks;
    for (std::size_t i = start; i < start + 256; ++i) blocks.insert(rows[i] / 64);
    CHECK(blocks.size() == 4);
  }
  // The last window: the three remaining full blocks and the tail.
  std::set<std::uint64_t> last;
  for (std::size_t i = 768; i < 1000; ++i) last.insert(rows[i] / 64);
  CHECK(last.size() == 4);
  CHECK(last.count(15) == 1);
  options.epoch = 1;
  CHECK(epoch_rows(options) != rows);
  options.block_rows = 5000;  // one short block: a plain shuffle of it
  CHECK(is_bijection(epoch_rows(options)));
}

TEST_CASE("invalid orders are errors") {
  OrderOptions options;
  options.rows = 10;
  options.batch_size = 0;
  CHECK_THROWS_AS(BatchOrder{options}, gpucache::Error);
  options.batch_size = 1;
  options.rank = 2;
  options.world_size = 2;
  CHECK_THROWS_AS(BatchOrder{options}, gpucache::Error);
}

TEST_CASE("the C ABI computes the same batches") {
  gpucache_order_options options;
  gpucache_order_options_init(&options);
  options.rows = 300;
  options.batch_size = 32;
  options.seed = 5;
  options.epoch = 1;
  options.world_size = 2;
  options.rank = 1;
  std::uint64_t batches = 0;
  REQUIRE(gpucache_order_batches(&options, &batches) == 0);
  OrderOptions cpp;
  cpp.rows = 300;
  cpp.batch_size = 32;
  cpp.seed = 5;
  cpp.epoch = 1;
  cpp.world_size = 2;
  cpp.rank = 1;
  const BatchOrder order(cpp);
  CHECK(batches == order.batches());
  std::vector<std::uint64_t> rows(32);
  std::uint64_t count = 0;
  REQUIRE(gpucache_order_batch(&options, 3, rows.data(), rows.size(), &count) == 0);
  CHECK(count == 32);
  CHECK(rows == order.batch(3));
  std::uint64_t out = 0;
  REQUIRE(gpucache_permute(10, 3, 4, &out) == 0);
  CHECK(out == Permutation(10, 3)(4));
  CHECK(gpucache_permute(10, 3, 10, &out) == -1);
  options.rank = 2;
  CHECK(gpucache_order_batches(&options, &batches) == -1);
  CHECK(std::string(gpucache_last_error()).find("rank 2") != std::string::npos);
}
