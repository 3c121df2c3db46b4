#include <cctype>

#include "gpucache/error.hpp"
#include "gpucache/progress.hpp"
#include "commands.hpp"

namespace gpucache::cli {

bool show_progress(bool quiet) {
  return !quiet && stderr_is_terminal();
}

std::uint64_t parse_size(const std::string& text, const std::string& option) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw UsageError(option + " '" + text + "' is not a size (examples: 4096, 512M, 1G)");
  }
  std::string unit = text.substr(used);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("IB"))
    unit.erase(unit.size() - 2);
  else if (unit.size() > 1 && unit.ends_with("B"))
    unit.pop_back();
  double scale = 1;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "K")
    scale = 1024.0;
  else if (unit == "M")
    scale = 1024.0 * 1024;
  else if (unit == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    throw UsageError(option + " '" + text + "' has an unknown unit (use K, M, G or T)");
  if (value <= 0) throw UsageError(option + " must be positive");
  return static_cast<std::uint64_t>(value * scale);
}

}  // namespace gpucache::cli
