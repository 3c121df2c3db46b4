// Overflow-safe arithmetic for parsers: every size computed from untrusted input goes through
// these, so a hostile count can never wrap around into a small allocation or an in-bounds offset.
#pragma once

#include <cstdint>
#include <optional>

namespace gpucache::detail {

inline std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t result;
  if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
  return result;
}

inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t result;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}

// Rounds value up to a multiple of alignment (any positive alignment, not only powers of two).
inline std::optional<std::uint64_t> checked_align_up(std::uint64_t value,
                                                     std::uint64_t alignment) noexcept {
  if (alignment == 0) return std::nullopt;
  const std::uint64_t remainder = value % alignment;
  if (remainder == 0) return value;
  return checked_add(value, alignment - remainder);
}

// True when [offset, offset + length) lies inside [0, limit).
inline bool range_within(std::uint64_t offset, std::uint64_t length, std::uint64_t limit) noexcept {
  return offset <= limit && length <= limit - offset;
}

}  // namespace gpucache::detail
