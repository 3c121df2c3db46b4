#include "pt/pickle_text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <vector>

namespace gpucache::detail::pickle {
namespace {

// Decodes one code point at text[pos]; nullopt on malformed or overlong input.
std::optional<char32_t> next_code_point(std::string_view text, std::size_t& pos) noexcept {
  const auto lead = static_cast<unsigned char>(text[pos]);
  std::size_t length;
  char32_t value;
  if (lead < 0x80) {
    ++pos;
    return lead;
  } else if ((lead & 0xe0) == 0xc0) {
    length = 2;
    value = lead & 0x1f;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3;
    value = lead & 0x0f;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4;
    value = lead & 0x07;
  } else {
    return std::nullopt;
  }
  if (text.size() - pos < length) return std::nullopt;
  for (std::size_t i = 1; i < length; ++i) {
    const auto next = static_cast<unsigned char>(text[pos + i]);
    if ((next & 0xc0) != 0x80) return std::nullopt;
    value = (value << 6) | (next & 0x3f);
  }
  static constexpr char32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
  if (value < kMinimum[length] || value > 0x10ffff) return std::nullopt;
  pos += length;
  return value;
}

}  // namespace

bool is_valid_utf8(std::string_view text) noexcept {
  std::size_t pos = 0;
  while (pos < text.size())
    if (!next_code_point(text, pos)) return false;
  return true;
}

std::optional<std::string> utf8_to_latin1(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto code = next_code_point(text, pos);
    if (!code || *code > 0xff) return std::nullopt;
    out.push_back(static_cast<char>(*code));
  }
  return out;
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[64];
  // The shortest digits that round-trip, as Python's repr uses, in scientific form d.ddde±x.
  const auto [end, ec] =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string_view text(buffer, static_cast<std::size_t>(end - buffer));
  std::string sign;
  if (text.front() == '-') {
    sign = "-";
    text.remove_prefix(1);
  }
  const auto e = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e))
    if (c != '.') digits.push_back(c);
  int exponent = 0;
  std::from_chars(text.data() + e + 1 + (text[e + 1] == '+'), text.data() + text.size(), exponent);
  const int point = exponent + 1;  // digits before the decimal point
  if (point > 16 || point < -3) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int magnitude = std::abs(exponent);
    out += exponent < 0 ? "e-" : "e+";
    if (magnitude < 10) out += "0";
    return out + std::to_string(magnitude);
  }
  if (point <= 0) return sign + "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
  if (static_cast<std::size_t>(point) >= digits.size())
    return sign + digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0') + ".0";
  return sign + digits.substr(0, point) + "." + digits.substr(point);
}

std::string signed_le_decimal(std::string_view le_bytes) {
  if (le_bytes.empty()) return "0";
  std::vector<std::uint8_t> magnitude(le_bytes.rbegin(), le_bytes.rend());  // big-endian
  const bool negative = magnitude.front() & 0x80;
  if (negative) {
    // Two's complement negation: invert, then add one.
    for (auto& byte : magnitude) byte = static_cast<std::uint8_t>(~byte);
    for (std::size_t i = magnitude.size(); i-- > 0;)
      if (++magnitude[i] != 0) break;
  }
  std::string digits;
  while (std::any_of(magnitude.begin(), magnitude.end(), [](std::uint8_t b) { return b != 0; })) {
    unsigned remainder = 0;
    for (auto& byte : magnitude) {
      const unsigned current = (remainder << 8) | byte;
      byte = static_cast<std::uint8_t>(current / 10);
      remainder = current % 10;
    }
    digits.push_back(static_cast<char>('0' + remainder));
  }
  if (digits.empty()) digits.push_back('0');
  if (negative) digits.push_back('-');
  return {digits.rbegin(), digits.rend()};
}

std::optional<std::uint64_t> canonical_decimal(std::string_view text,
                                               std::uint64_t limit) noexcept {
  if (text.empty() || text.size() > 18 || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  std::uint64_t number = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    number = number * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (number >= limit) return std::nullopt;
  return number;
}

}  // namespace gpucache::detail::pickle
