// Which rows make up each batch of an epoch, computed from the batch's index alone: a keyed,
// stateless bijection of the row indices (a Feistel network over the next even power of two,
// cycle-walked back into [0, rows)), so no permutation is ever held in memory. The Python layer
// (gpucache/_order.py) computes the same function with torch or numpy; GPUBatches over a resident
// dataset and the batch stream therefore yield the same batches for the same options.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "gpucache/api.hpp"
#include "gpucache/error.hpp"

namespace gpucache::runtime {

// A bijection of [0, size) chosen by `key`. Six Feistel rounds on two halves of h bits each
// (2h >= bit width of size - 1); positions that land at or beyond `size` are encrypted again until
// they fall inside (cycle walking: at most 4 steps on average, since the domain is < 4 × size).
// size must be below 2^62.
class GPUCACHE_API Permutation {
 public:
  static constexpr int kRounds = 6;
  Permutation(std::uint64_t size, std::uint64_t key);
  std::uint64_t size() const noexcept { return size_; }
  // The image of `index` (< size()).
  std::uint64_t operator()(std::uint64_t index) const noexcept;

 private:
  std::uint64_t encrypt(std::uint64_t value) const noexcept;
  std::uint64_t size_;
  unsigned half_bits_ = 0;
  std::uint64_t half_mask_ = 0;
  std::array<std::uint32_t, kRounds> round_keys_{};
};

// The key of permutation `tag` of an epoch: tag 0 orders rows (full shuffle), tag 1 orders blocks,
// tag 2 + w orders the rows inside window w (block shuffle). splitmix64 mixes of seed and epoch.
GPUCACHE_API std::uint64_t order_key(std::uint64_t seed, std::uint64_t epoch,
                                     std::uint64_t tag) noexcept;

struct OrderOptions {
  std::uint64_t rows = 0;  // rows of the dataset (selection) being ordered
  std::uint64_t batch_size = 1;
  bool shuffle = true;
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  std::uint32_t rank = 0;
  std::uint32_t world_size = 1;
  // true: every rank gets rows / world_size rows and the final short batch is dropped. false:
  // every rank gets ceil(rows / world_size) rows, the missing ones repeated from the start of the
  // epoch's order (as DistributedSampler pads), and the final short batch is kept.
  bool drop_last = true;
  // With drop_last false: true pads every rank to ceil(rows / world_size) rows as above; false
  // gives every row exactly once, rank r the positions r, r + world_size, ... below rows (ranks
  // differ by at most one row). The Python package uses false.
  bool pad = true;
  // Block shuffle when nonzero: blocks of block_rows consecutive rows are put in a random order,
  // then rows are shuffled within windows of window_blocks consecutive blocks of that order, so a
  // window reads only window_blocks stretches of the files. The last, short block (rows %
  // block_rows rows) always belongs to the last window.
  std::uint64_t block_rows = 0;
  std::uint64_t window_blocks = 1;
};

// The batches of one rank in one epoch. Rank r's position j is the epoch's global position
// j × world_size + r (DistributedSampler's interleaving), so batch b of all ranks together covers
// global positions [b × batch_size × world_size, (b + 1) × batch_size × world_size): a new world
// size can resume from the same place (docs/python.md "Resuming").
class GPUCACHE_API BatchOrder {
 public:
  // Throws gpucache::Error for batch_size 0, world_size 0, rank >= world_size, window_blocks 0
  // or rows >= 2^62.
  explicit BatchOrder(const OrderOptions& options);
  const OrderOptions& options() const noexcept { return options_; }
  std::uint64_t rank_rows() const noexcept { return rank_rows_; }  // rows this rank gets
  std::uint64_t batches() const noexcept;
  std::uint64_t batch_rows(std::uint64_t batch) const noexcept;  // batch_size, or fewer at the end
  // Row of the epoch's global position `position` (< rows).
  std::uint64_t row_at(std::uint64_t position) const noexcept;
  // The rows of batch `batch` (< batches()) in order; `out` holds batch_rows(batch) of them.
  void batch(std::uint64_t batch, std::span<std::uint64_t> out) const;
  std::vector<std::uint64_t> batch(std::uint64_t batch) const;

 private:
  OrderOptions options_;
  std::uint64_t rank_rows_ = 0;
  Permutation rows_;    // full shuffle
  Permutation blocks_;  // block shuffle
  std::uint64_t full_blocks_ = 0, windows_ = 1, window_rows_ = 0;
};

// Where to resume under batch_size and world_size from a position saved as batch `saved_batch`
// under saved_batch_size and saved_world_size: the saved progress is saved_batch ×
// saved_batch_size × saved_world_size global positions, rounded down to a whole batch of the new
// ranks, so no row is skipped and at most batch_size × world_size - 1 are seen again.
GPUCACHE_API std::uint64_t resume_batch(std::uint64_t saved_batch, std::uint64_t saved_batch_size,
                                        std::uint64_t saved_world_size, std::uint64_t batch_size,
                                        std::uint64_t world_size);

}  // namespace gpucache::runtime
