// Parquet's RLE / bit-packing hybrid (levels, dictionary indices, v2 booleans), read run by run:
// a repeated run is one value and a count, so a column without nulls has its levels checked in a
// few steps per page instead of one per value. FORMAT.md has the layout.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "gpucache/error.hpp"

namespace gpucache::detail::parquet {

class RleRuns {
 public:
  // bit_width 0..32. `what` names the stream in errors ("definition levels of column x").
  RleRuns(std::span<const std::byte> bytes, int bit_width, const std::string& origin,
          std::string what)
      : bytes_(bytes), bit_width_(bit_width), origin_(origin), what_(std::move(what)) {
    if (bit_width < 0 || bit_width > 32) fail("a bit width of " + std::to_string(bit_width));
  }

  struct Run {
    bool repeated = false;
    std::uint64_t count = 0;            // values in the run (a literal run: a multiple of 8)
    std::uint32_t value = 0;            // repeated runs
    const std::byte* packed = nullptr;  // literal runs: count * bit_width bits, LSB first
  };

  // The next run, or false at the end of the bytes.
  bool next(Run& run) {
    if (position_ >= bytes_.size()) return false;
    const std::uint64_t header = varint();
    const int value_bytes = (bit_width_ + 7) / 8;
    if (header & 1) {
      const std::uint64_t groups = header >> 1;
      if (bit_width_ > 0 ? groups > (bytes_.size() - position_) / bit_width_
                         : groups > (std::uint64_t{1} << 56))
        fail("a bit-packed run of " + std::to_string(groups * 8) + " values runs past the end");
      run = {false, groups * 8, 0, bytes_.data() + position_};
      position_ += groups * bit_width_;
      return true;
    }
    if (static_cast<std::uint64_t>(value_bytes) > bytes_.size() - position_)
      fail("a repeated run's value runs past the end");
    std::uint32_t value = 0;
    for (int i = 0; i < value_bytes; ++i)
      value |= static_cast<std::uint32_t>(bytes_[position_ + i]) << (8 * i);
    position_ += value_bytes;
    if (bit_width_ < 32 && (value >> bit_width_) != 0)
      fail("a repeated run's value " + std::to_string(value) + " does not fit " +
           std::to_string(bit_width_) + " bits");
    run = {true, header >> 1, value, nullptr};
    return true;
  }

  // Value i of a literal run.
  std::uint32_t literal(const Run& run, std::uint64_t i) const noexcept {
    const std::uint64_t bit = i * bit_width_;
    const std::byte* at = run.packed + bit / 8;
    const std::uint64_t bytes_needed = (bit % 8 + bit_width_ + 7) / 8;
    std::uint64_t word = 0;
    for (std::uint64_t b = 0; b < bytes_needed; ++b)
      word |= static_cast<std::uint64_t>(at[b]) << (8 * b);
    const std::uint64_t mask = bit_width_ == 32 ? 0xffffffffull : (1ull << bit_width_) - 1;
    return static_cast<std::uint32_t>((word >> (bit % 8)) & mask);
  }

  int bit_width() const noexcept { return bit_width_; }
  [[noreturn]] void fail(const std::string& cause) const { throw Error(origin_, what_, cause); }

 private:
  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      if (position_ >= bytes_.size()) fail("a run header runs past the end");
      const auto byte = static_cast<std::uint8_t>(bytes_[position_++]);
      if (shift == 63 && (byte & 0x7e) != 0) fail("a run header overflows 64 bits");
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    fail("a run header longer than 10 bytes");
  }

  std::span<const std::byte> bytes_;
  int bit_width_;
  const std::string& origin_;
  std::string what_;
  std::uint64_t position_ = 0;
};

// `count` values of the hybrid stream into out; fails when the stream holds fewer.
inline void decode_rle(RleRuns& runs, std::uint64_t count, std::uint32_t* out) {
  RleRuns::Run run;
  std::uint64_t done = 0;
  while (done < count && runs.next(run)) {
    const std::uint64_t n = std::min(run.count, count - done);
    if (run.repeated) {
      std::fill(out + done, out + done + n, run.value);
    } else {
      for (std::uint64_t i = 0; i < n; ++i) out[done + i] = runs.literal(run, i);
    }
    done += n;
  }
  if (done < count)
    runs.fail("holds " + std::to_string(done) + " values where " + std::to_string(count) +
              " were expected");
}

}  // namespace gpucache::detail::parquet
