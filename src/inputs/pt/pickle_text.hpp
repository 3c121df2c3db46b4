// Text conversions the pickle machine needs without Python: UTF-8 checks, latin-1 encoding for
// _codecs.encode, Python's repr of floats and decimal text of integers wider than 64 bits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpucache::detail::pickle {

// Well-formed UTF-8, allowing encoded surrogates as CPython's "surrogatepass" does for pickles.
bool is_valid_utf8(std::string_view text) noexcept;
// Each code point of UTF-8 `text` as one byte; nullopt when one is above U+00FF.
std::optional<std::string> utf8_to_latin1(std::string_view text);
// repr(value) as Python prints it ("1.0", "1e-05", "inf"), for float dict keys.
std::string python_float_repr(double value);
// Decimal text of a little-endian two's complement integer of any width.
std::string signed_le_decimal(std::string_view le_bytes);
// The number canonical decimal text stands for ("0", "17"; never "017", "+1" or "") when it is
// below `limit`. torch numbers its storages this way; callers index them by number in a vector.
std::optional<std::uint64_t> canonical_decimal(std::string_view text, std::uint64_t limit) noexcept;

}  // namespace gpucache::detail::pickle
