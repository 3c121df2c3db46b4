// Parquet's DELTA encodings (parquet-format's Encodings.md): DELTA_BINARY_PACKED integers, and
// DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY byte strings, which are built on it. Each decoder
// reads one page's values and throws DeltaError with the cause when the bytes are not such a
// stream; the chunk decoder names the file, column and row group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

namespace gpucache::detail::parquet {

struct DeltaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A DELTA_BINARY_PACKED stream at the start of `bytes` holding `count` values: its values (wrapped
// to 64 bits as the format's two's-complement arithmetic wants; an INT32 column keeps the low 32
// bits) appended to `out`, and the bytes the stream takes returned. `count` must be the stream's
// own total (the caller checks 8 × count against its cap before it asks).
std::size_t decode_delta_binary_packed(std::span<const std::byte> bytes, std::uint64_t count,
                                       std::vector<std::uint64_t>& out);
// The value count a DELTA_BINARY_PACKED stream's header claims (its third varint).
std::uint64_t delta_binary_packed_count(std::span<const std::byte> bytes);

// DELTA_LENGTH_BYTE_ARRAY: the lengths (DELTA_BINARY_PACKED), then the strings one after another.
// Appends `count` strings to `text` with their end offsets to `offsets`; `cap` bounds text.size().
void decode_delta_length_byte_array(std::span<const std::byte> bytes, std::uint64_t count,
                                    std::vector<std::byte>& text,
                                    std::vector<std::uint64_t>& offsets, std::uint64_t cap);
// DELTA_BYTE_ARRAY: prefix lengths (DELTA_BINARY_PACKED), then the suffixes
// (DELTA_LENGTH_BYTE_ARRAY); string i is the first prefix[i] bytes of string i − 1, then suffix i.
// Each page starts from an empty string.
void decode_delta_byte_array(std::span<const std::byte> bytes, std::uint64_t count,
                             std::vector<std::byte>& text, std::vector<std::uint64_t>& offsets,
                             std::uint64_t cap);

}  // namespace gpucache::detail::parquet
