#include "gpucache/shard/dataset_files.hpp"

#include <algorithm>
#include <cstdio>

namespace gpucache::shard {

std::string shard_file_name(std::uint32_t index) {
  char text[32];
  std::snprintf(text, sizeof text, "shard-%05u.gcs", index);
  return text;
}

std::optional<std::uint32_t> shard_file_index(std::string_view name) noexcept {
  constexpr std::string_view prefix = "shard-", suffix = ".gcs";
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
      !name.ends_with(suffix))
    return std::nullopt;
  const std::string_view digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 10 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  std::uint64_t value = 0;
  for (char c : digits) value = value * 10 + static_cast<std::uint64_t>(c - '0');
  if (value > UINT32_MAX) return std::nullopt;
  return static_cast<std::uint32_t>(value);
}

bool is_temporary_name(std::string_view name) noexcept {
  return name.size() > kTemporarySuffix.size() && name.ends_with(kTemporarySuffix);
}

bool is_dataset_file(std::string_view name) noexcept {
  if (is_temporary_name(name)) name.remove_suffix(kTemporarySuffix.size());
  return name == kManifestName || name == kPackStateName || shard_file_index(name).has_value();
}

}  // namespace gpucache::shard
