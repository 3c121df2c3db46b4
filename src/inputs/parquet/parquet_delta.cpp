#include "parquet_delta.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace gpucache::detail::parquet {
namespace {

class Cursor {
 public:
  explicit Cursor(std::span<const std::byte> bytes) : bytes_(bytes) {}

  std::uint64_t varint(const char* what) {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (at_ >= bytes_.size())
        throw DeltaError(std::string("a DELTA stream ends inside its ") + what);
      const auto byte = static_cast<std::uint8_t>(bytes_[at_++]);
      if (shift == 63 && (byte & 0x7e))
        throw DeltaError(std::string("a DELTA stream's ") + what + " overflows 64 bits");
      value |= std::uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    throw DeltaError(std::string("a DELTA stream's ") + what + " is a varint longer than 10 bytes");
  }
  std::uint64_t zigzag(const char* what) {
    const std::uint64_t n = varint(what);
    return (n >> 1) ^ (~(n & 1) + 1);
  }
  std::size_t position() const noexcept { return at_; }
  std::size_t left() const noexcept { return bytes_.size() - at_; }
  const std::byte* here() const noexcept { return bytes_.data() + at_; }
  void skip(std::size_t n) noexcept { at_ += n; }

 private:
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

// `count` values of `width` bits packed from the least significant bit of `in` on.
void unpack(const std::byte* in, unsigned width, std::uint64_t count, std::uint64_t* out) {
  if (width == 0) {
    std::fill(out, out + count, 0);
    return;
  }
  const std::uint64_t mask = width == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width) - 1;
  std::uint64_t bit = 0;
  for (std::uint64_t i = 0; i < count; ++i, bit += width) {
    // Up to 64 bits starting at any bit: read the 9 bytes that may hold them.
    const std::uint64_t byte = bit / 8;
    const unsigned shift = static_cast<unsigned>(bit % 8);
    const std::uint64_t bytes_needed = (shift + width + 7) / 8;
    unsigned char window[16] = {};
    std::memcpy(window, in + byte, bytes_needed);
    std::uint64_t low;
    std::memcpy(&low, window, 8);
    std::uint64_t value = low >> shift;
    if (shift + width > 64) value |= std::uint64_t(window[8]) << (64 - shift);
    out[i] = value & mask;
  }
}

struct Header {
  std::uint64_t block_size, miniblocks, count, first;
};

Header read_header(Cursor& cursor) {
  Header header;
  header.block_size = cursor.varint("block size");
  header.miniblocks = cursor.varint("miniblock count");
  header.count = cursor.varint("value count");
  header.first = cursor.zigzag("first value");
  if (header.block_size == 0 || header.block_size % 128 != 0 || header.block_size > (1u << 20))
    throw DeltaError("a DELTA stream's block size (" + std::to_string(header.block_size) +
                     ") is not a multiple of 128 up to 2^20");
  if (header.miniblocks == 0 || header.block_size % header.miniblocks != 0 ||
      (header.block_size / header.miniblocks) % 32 != 0)
    throw DeltaError("a DELTA stream's " + std::to_string(header.miniblocks) +
                     " miniblocks do not split its blocks of " + std::to_string(header.block_size) +
                     " values into multiples of 32");
  return header;
}

}  // namespace

std::uint64_t delta_binary_packed_count(std::span<const std::byte> bytes) {
  Cursor cursor(bytes);
  return read_header(cursor).count;
}

std::size_t decode_delta_binary_packed(std::span<const std::byte> bytes, std::uint64_t count,
                                       std::vector<std::uint64_t>& out) {
  Cursor cursor(bytes);
  const Header header = read_header(cursor);
  if (header.count != count)
    throw DeltaError("a DELTA stream holds " + std::to_string(header.count) +
                     " values where its page has " + std::to_string(count));
  if (count == 0) return cursor.position();
  const std::size_t start = out.size();
  out.resize(start + count);
  std::uint64_t* values = out.data() + start;
  values[0] = header.first;
  std::uint64_t done = 1, previous = header.first;
  const std::uint64_t per_miniblock = header.block_size / header.miniblocks;
  std::vector<std::uint64_t> deltas(per_miniblock);
  while (done < count) {
    const std::uint64_t min_delta = cursor.zigzag("block's minimum delta");
    if (cursor.left() < header.miniblocks)
      throw DeltaError("a DELTA stream ends inside a block's bit widths");
    const std::byte* widths = cursor.here();
    cursor.skip(header.miniblocks);
    for (std::uint64_t m = 0; m < header.miniblocks && done < count; ++m) {
      const auto width = static_cast<unsigned>(widths[m]);
      if (width > 64)
        throw DeltaError("a DELTA miniblock's bit width (" + std::to_string(width) +
                         ") is above 64");
      const std::uint64_t n = std::min(per_miniblock, count - done);
      // A miniblock takes per_miniblock × width bits; the last one may stop after its values
      // (the format pads it, but a reader needs only what the values take).
      const std::uint64_t full = per_miniblock * width / 8;
      const std::uint64_t needed = (n * width + 7) / 8;
      if (cursor.left() < needed) throw DeltaError("a DELTA stream ends inside a miniblock");
      unpack(cursor.here(), width, n, deltas.data());
      cursor.skip(static_cast<std::size_t>(std::min<std::uint64_t>(full, cursor.left())));
      for (std::uint64_t i = 0; i < n; ++i) {
        previous += min_delta + deltas[i];  // wraps, as the format's arithmetic does
        values[done++] = previous;
      }
    }
  }
  return cursor.position();
}

namespace {

// Lengths as DELTA_BINARY_PACKED, checked to be lengths; returns the bytes they take.
std::size_t read_lengths(std::span<const std::byte> bytes, std::uint64_t count,
                         std::vector<std::uint64_t>& lengths, const char* what) {
  lengths.clear();
  const std::size_t used = decode_delta_binary_packed(bytes, count, lengths);
  for (std::uint64_t& length : lengths) {
    const auto value = static_cast<std::int64_t>(length);
    if (value < 0 || value > INT32_MAX)
      throw DeltaError(std::string("a DELTA stream's ") + what + " (" + std::to_string(value) +
                       ") is negative or above 2^31");
  }
  return used;
}

}  // namespace

void decode_delta_length_byte_array(std::span<const std::byte> bytes, std::uint64_t count,
                                    std::vector<std::byte>& text,
                                    std::vector<std::uint64_t>& offsets, std::uint64_t cap) {
  std::vector<std::uint64_t> lengths;
  std::size_t at = read_lengths(bytes, count, lengths, "string length");
  for (const std::uint64_t length : lengths) {
    if (length > bytes.size() - at) throw DeltaError("a string runs past its page");
    if (length > cap - std::min<std::uint64_t>(cap, text.size()))
      throw DeltaError("its strings decode to far more than its bytes");
    text.insert(text.end(), bytes.begin() + static_cast<std::ptrdiff_t>(at),
                bytes.begin() + static_cast<std::ptrdiff_t>(at + length));
    at += length;
    offsets.push_back(text.size());
  }
}

void decode_delta_byte_array(std::span<const std::byte> bytes, std::uint64_t count,
                             std::vector<std::byte>& text, std::vector<std::uint64_t>& offsets,
                             std::uint64_t cap) {
  std::vector<std::uint64_t> prefixes, lengths;
  std::size_t at = read_lengths(bytes, count, prefixes, "prefix length");
  at += read_lengths(bytes.subspan(at), count, lengths, "suffix length");
  std::uint64_t previous_begin = 0, previous_length = 0;  // the page starts from ""
  for (std::uint64_t i = 0; i < count; ++i) {
    if (prefixes[i] > previous_length)
      throw DeltaError("a DELTA_BYTE_ARRAY prefix (" + std::to_string(prefixes[i]) +
                       ") is longer than the string before it (" + std::to_string(previous_length) +
                       ")");
    if (lengths[i] > bytes.size() - at) throw DeltaError("a string runs past its page");
    const std::uint64_t length = prefixes[i] + lengths[i];
    if (length > cap - std::min<std::uint64_t>(cap, text.size()))
      throw DeltaError("its strings decode to far more than its bytes");
    const std::uint64_t begin = text.size();
    // The prefix is copied out of `text` itself: grow it first, then copy within.
    text.resize(begin + length);
    // (An empty text has no storage: memmove and memcpy may not be given its null pointer.)
    if (prefixes[i] > 0)
      std::memmove(text.data() + begin, text.data() + previous_begin, prefixes[i]);
    if (lengths[i] > 0)
      std::memcpy(text.data() + begin + prefixes[i], bytes.data() + at, lengths[i]);
    at += lengths[i];
    offsets.push_back(text.size());
    previous_begin = begin;
    previous_length = length;
  }
}

}  // namespace gpucache::detail::parquet
