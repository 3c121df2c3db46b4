#include "cache_size.hpp"

#include <cctype>
#include <cmath>
#include <string>

namespace gpucache::remote::detail {

std::optional<std::uint64_t> parse_cache_size(std::string_view text) noexcept {
  std::size_t digits = 0;
  bool dot = false;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) ||
                                  (!dot && text[digits] == '.'))) {
    dot = dot || text[digits] == '.';
    ++digits;
  }
  if (digits == 0 || digits > 20 || (dot && digits == 1)) return std::nullopt;
  std::string_view unit = text.substr(digits);
  if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "iB")
    unit.remove_suffix(2);
  else if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b'))
    unit.remove_suffix(1);
  double scale = 1;
  if (unit.size() == 1) {
    switch (std::toupper(static_cast<unsigned char>(unit[0]))) {
      case 'K':
        scale = 1024.0;
        break;
      case 'M':
        scale = 1024.0 * 1024;
        break;
      case 'G':
        scale = 1024.0 * 1024 * 1024;
        break;
      case 'T':
        scale = 1024.0 * 1024 * 1024 * 1024;
        break;
      default:
        return std::nullopt;
    }
  } else if (!unit.empty()) {
    return std::nullopt;
  }
  const double value = std::stod(std::string(text.substr(0, digits))) * scale;
  if (!(value >= 1) || value >= 9.0e18) return std::nullopt;
  return static_cast<std::uint64_t>(std::llround(value));
}

}  // namespace gpucache::remote::detail
