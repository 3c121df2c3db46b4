#include "gpucache/checks.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "gpucache/error.hpp"
#include "gpucache/validate.hpp"

namespace gpucache {
namespace {

// "finite, nonzero, norm, pair_cos, dedup": the checks --checks takes.
std::string selectable_names() {
  std::string names;
  for (const auto& info : kChecks)
    if (info.selectable) names += (names.empty() ? "" : ", ") + std::string(info.name);
  return names;
}

// The types the checks read (widened to f32).
bool checkable(DType dtype) {
  return float_storage_dtype(dtype);
}

std::optional<double> parse_bound(std::string_view text) {
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || errno == ERANGE || std::isnan(value))
    return std::nullopt;
  return value;
}

}  // namespace

std::optional<Check> parse_check(std::string_view name) noexcept {
  for (const auto& info : kChecks)
    if (info.selectable && info.name == name) return info.check;
  return std::nullopt;
}

std::string describe_checks(CheckSet checks) {
  std::string text;
  for (const auto& info : kChecks)
    if (checks.has(info.check)) text += (text.empty() ? "" : ", ") + std::string(info.name);
  return text.empty() ? "none" : text;
}

CheckSet default_checks(ColumnRole role, DType dtype, bool dedup) noexcept {
  if (!checkable(dtype)) return {};
  switch (role) {
    case ColumnRole::embedding: {
      CheckSet checks{Check::finite, Check::nonzero, Check::norm};
      if (dedup) checks.add(Check::dedup);
      return checks;
    }
    case ColumnRole::tensor:
      return {Check::finite};
    case ColumnRole::sequence:
    case ColumnRole::text:
      return {};
  }
  return {};
}

std::string check_refusal(Check check, const std::string& column, ColumnRole role, DType dtype) {
  const std::string name(check_name(check));
  if (check == Check::null)
    return name +
           " is not chosen per column: every packed column has it, and --on-null says what it "
           "does";
  if (!check_info(check).selectable)
    return name +
           " is not chosen per column: every column stored as f16 or bf16 has it, and "
           "--on-overflow says what it does";
  if (role == ColumnRole::sequence || role == ColumnRole::text)
    return name + " needs tensor rows of float values; '" + column + "' is a " +
           std::string(column_role_name(role)) + " column";
  if (!checkable(dtype))
    return name + " needs float values (f16, bf16, f32 or f64); '" + column + "' is " +
           std::string(dtype_name(dtype));
  return {};
}

ChecksSpec parse_checks_spec(std::string_view text) {
  const std::string quoted = "--checks '" + std::string(text) + "': ";
  const auto equals = text.find('=');
  if (equals == std::string_view::npos || equals == 0)
    throw UsageError(quoted + "expected COLUMN=CHECK,CHECK,... with checks among " +
                     selectable_names() + " (or none)");
  ChecksSpec spec;
  spec.column = std::string(text.substr(0, equals));
  const std::string_view list = text.substr(equals + 1);
  if (list.empty())
    throw UsageError(quoted + "no checks after '='; name them (" + selectable_names() +
                     ") or write none");
  bool none = false, any = false;
  for (std::size_t begin = 0; begin <= list.size();) {
    const std::size_t comma = std::min(list.find(',', begin), list.size());
    const std::string_view item = list.substr(begin, comma - begin);
    begin = comma + 1;
    const std::string_view name = item.substr(0, item.find(':'));
    if (name == "none") {
      if (item != name) throw UsageError(quoted + "none takes no bounds");
      none = true;
      continue;
    }
    const auto check = parse_check(name);
    if (!check) {
      for (const auto& info : kChecks)
        if (!info.selectable && name == info.name)
          throw UsageError(quoted +
                           check_refusal(info.check, spec.column, ColumnRole::tensor, DType::f32));
      throw UsageError(quoted + "unknown check '" + std::string(name) + "'; the checks are " +
                       selectable_names() + " (or none)");
    }
    if (spec.checks.has(*check))
      throw UsageError(quoted + "'" + std::string(name) + "' is given twice");
    spec.checks.add(*check);
    any = true;
    if (item == name) continue;
    if (*check != Check::norm)
      throw UsageError(quoted + "only norm takes bounds (norm:MIN:MAX), not " + std::string(name));
    // norm:MIN:MAX, either side empty for the dataset-wide bound.
    const std::string_view bounds = item.substr(name.size() + 1);
    const auto colon = bounds.find(':');
    if (colon == std::string_view::npos)
      throw UsageError(quoted + "norm bounds are norm:MIN:MAX (either may be empty), got '" +
                       std::string(item) + "'");
    const std::string_view low = bounds.substr(0, colon), high = bounds.substr(colon + 1);
    if (!low.empty() && !(spec.norm_min = parse_bound(low)))
      throw UsageError(quoted + "the norm's MIN '" + std::string(low) + "' is not a number");
    if (!high.empty() && !(spec.norm_max = parse_bound(high)))
      throw UsageError(quoted + "the norm's MAX '" + std::string(high) + "' is not a number");
  }
  if (none && any) throw UsageError(quoted + "none cannot be combined with other checks");
  return spec;
}

}  // namespace gpucache
