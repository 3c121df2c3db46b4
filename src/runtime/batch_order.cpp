#include "gpucache/batch_order.hpp"

#include <bit>
#include <string>

#include "gpucache/error.hpp"

namespace gpucache::runtime {
namespace {

constexpr std::uint64_t kMaxRows = 1ull << 62;  // keeps the halves and shifts inside int64

// splitmix64's finaliser (Steele, Lea, Flood): every bit of the input moves every bit of the
// output.
std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The round function on a half of at most 31 bits. Multipliers stay below 2^31 so every product
// fits a signed 64-bit integer: torch and numpy compute it in int64 with the same result.
std::uint64_t round_function(std::uint64_t half, std::uint32_t key) noexcept {
  std::uint64_t x = (half ^ key) & 0xFFFFFFFFull;
  x = (x * 0x6C8E9CF5ull) & 0xFFFFFFFFull;
  x ^= x >> 15;
  x = (x * 0x4F6CDD1Dull) & 0xFFFFFFFFull;
  x ^= x >> 13;
  return x;
}

}  // namespace

std::uint64_t order_key(std::uint64_t seed, std::uint64_t epoch, std::uint64_t tag) noexcept {
  return mix(mix(mix(seed) ^ mix(epoch)) + tag);
}

Permutation::Permutation(std::uint64_t size, std::uint64_t key) : size_(size) {
  if (size >= kMaxRows)
    throw Error("", "shuffle", std::to_string(size) + " rows: at most 2^62 can be shuffled");
  if (size <= 1) return;
  const unsigned bits = static_cast<unsigned>(std::bit_width(size - 1));
  half_bits_ = (bits + 1) / 2;
  half_mask_ = (1ull << half_bits_) - 1;
  for (int i = 0; i < kRounds; ++i)
    round_keys_[i] = static_cast<std::uint32_t>(mix(key + static_cast<std::uint64_t>(i) + 1));
}

std::uint64_t Permutation::encrypt(std::uint64_t value) const noexcept {
  std::uint64_t left = value >> half_bits_, right = value & half_mask_;
  for (const std::uint32_t key : round_keys_) {
    const std::uint64_t next = left ^ (round_function(right, key) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

std::uint64_t Permutation::operator()(std::uint64_t index) const noexcept {
  if (size_ <= 1) return index;
  std::uint64_t value = encrypt(index);
  while (value >= size_) value = encrypt(value);
  return value;
}

BatchOrder::BatchOrder(const OrderOptions& options)
    : options_(options),
      rows_(options.shuffle && options.block_rows == 0 ? options.rows : 0,
            order_key(options.seed, options.epoch, 0)),
      blocks_(options.shuffle && options.block_rows != 0 ? options.rows / options.block_rows : 0,
              order_key(options.seed, options.epoch, 1)) {
  if (options.batch_size == 0) throw Error("", "batch order", "batch_size must be at least 1");
  if (options.world_size == 0) throw Error("", "batch order", "world_size must be at least 1");
  if (options.rank >= options.world_size)
    throw Error("", "batch order",
                "rank " + std::to_string(options.rank) + " is not below world_size " +
                    std::to_string(options.world_size));
  if (options.window_blocks == 0)
    throw Error("", "batch order", "window_blocks must be at least 1");
  if (options.rows >= kMaxRows)
    throw Error("", "batch order",
                std::to_string(options.rows) + " rows: at most 2^62 can be ordered");
  const std::uint64_t world = options.world_size;
  if (options.drop_last)
    rank_rows_ = options.rows / world;
  else if (options.pad)
    rank_rows_ = (options.rows + world - 1) / world;
  else  // positions rank, rank + world, ... below rows
    rank_rows_ =
        options.rank < options.rows ? (options.rows - options.rank + world - 1) / world : 0;
  if (options.block_rows != 0) {
    full_blocks_ = options.rows / options.block_rows;
    window_rows_ = options.block_rows * options.window_blocks;
    windows_ =
        full_blocks_ == 0 ? 1 : (full_blocks_ + options.window_blocks - 1) / options.window_blocks;
  }
}

std::uint64_t BatchOrder::batches() const noexcept {
  const std::uint64_t size = options_.batch_size;
  return options_.drop_last ? rank_rows_ / size : (rank_rows_ + size - 1) / size;
}

std::uint64_t BatchOrder::batch_rows(std::uint64_t batch) const noexcept {
  const std::uint64_t begin = batch * options_.batch_size;
  if (begin >= rank_rows_) return 0;
  return std::min(options_.batch_size, rank_rows_ - begin);
}

std::uint64_t BatchOrder::row_at(std::uint64_t position) const noexcept {
  if (!options_.shuffle) return position;
  if (options_.block_rows == 0) return rows_(position);
  const std::uint64_t window = std::min(position / window_rows_, windows_ - 1);
  const std::uint64_t start = window * window_rows_;
  const std::uint64_t size = window + 1 == windows_ ? options_.rows - start : window_rows_;
  const std::uint64_t local =
      Permutation(size, order_key(options_.seed, options_.epoch, 2 + window))(position - start);
  const std::uint64_t slot = window * options_.window_blocks + local / options_.block_rows;
  const std::uint64_t within = local % options_.block_rows;
  const std::uint64_t block = slot < full_blocks_ ? blocks_(slot) : full_blocks_;
  return block * options_.block_rows + within;
}

void BatchOrder::batch(std::uint64_t batch, std::span<std::uint64_t> out) const {
  const std::uint64_t count = batch_rows(batch);
  if (batch >= batches() || out.size() < count)
    throw Error("", "batch order",
                "batch " + std::to_string(batch) + " of " + std::to_string(batches()) +
                    (batch >= batches() ? " does not exist" : ": the output is too small"));
  const std::uint64_t world = options_.world_size;
  for (std::uint64_t t = 0; t < count; ++t) {
    const std::uint64_t local = batch * options_.batch_size + t;
    // Padding positions (beyond the rows, drop_last false) repeat the epoch's first positions.
    const std::uint64_t position = (local * world + options_.rank) % options_.rows;
    out[t] = row_at(position);
  }
}

std::vector<std::uint64_t> BatchOrder::batch(std::uint64_t index) const {
  std::vector<std::uint64_t> rows(batch_rows(index));
  batch(index, rows);
  return rows;
}

std::uint64_t resume_batch(std::uint64_t saved_batch, std::uint64_t saved_batch_size,
                           std::uint64_t saved_world_size, std::uint64_t batch_size,
                           std::uint64_t world_size) {
  if (batch_size == 0 || world_size == 0)
    throw Error("", "resume", "batch_size and world_size must be at least 1");
  // Positions of an epoch stay below 2^62 + batch_size × world_size (rows < 2^62), so the
  // products fit.
  return saved_batch * saved_batch_size * saved_world_size / (batch_size * world_size);
}

}  // namespace gpucache::runtime
