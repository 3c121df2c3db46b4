#include "pack_split.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "gpucache/error.hpp"

namespace gpucache::detail {
namespace {

// SplitMix64's finaliser: a bijection of 64-bit values that mixes every input bit into every
// output bit, so consecutive row indices get unrelated hashes.
std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

SplitRule::SplitRule(std::vector<SplitSpec> splits, std::uint64_t seed)
    : splits_(std::move(splits)), seed_(seed) {
  if (splits_.size() < 2)
    throw UsageError("--split needs at least two splits, e.g. train=0.9,val=0.1");
  std::set<std::string> names;
  double total = 0;
  for (const auto& split : splits_) {
    if (!names.insert(split.name).second)
      throw UsageError("--split names '" + split.name + "' twice");
    if (!(split.fraction > 0) || !std::isfinite(split.fraction))
      throw UsageError("--split " + split.name + ": the fraction must be above 0");
    total += split.fraction;
  }
  if (std::abs(total - 1.0) > 1e-9)
    throw UsageError("--split fractions add up to " + std::to_string(total) + ", not 1");
  double running = 0;
  for (std::size_t i = 0; i < splits_.size(); ++i) {
    running += splits_[i].fraction;
    // 2^64 * running, the last bound the whole range so every hash has a split.
    bounds_.push_back(
        i + 1 == splits_.size() ? UINT64_MAX : static_cast<std::uint64_t>(std::ldexp(running, 64)));
  }
}

std::size_t SplitRule::split_of(std::uint64_t global_row) const noexcept {
  const std::uint64_t hash = mix(mix(seed_) ^ global_row);
  for (std::size_t i = 0; i + 1 < bounds_.size(); ++i)
    if (hash < bounds_[i]) return i;
  return bounds_.size() - 1;
}

std::vector<RowList> SplitRule::assign(RowList& rows) const {
  std::vector<RowList> parts;
  for (std::size_t i = 0; i < splits_.size(); ++i) parts.emplace_back(rows.policy());
  std::vector<std::size_t> released(parts.size(), 0);
  constexpr std::size_t kWindow = std::size_t(1) << 20;
  for (std::size_t first = 0; first < rows.size(); first += kWindow) {
    const std::size_t end = std::min(rows.size(), first + kWindow);
    for (std::size_t i = first; i < end; ++i) parts[split_of(rows[i])].push_back(rows[i]);
    rows.release(first, end - first);
    for (std::size_t p = 0; p < parts.size(); ++p) {
      parts[p].release(released[p], parts[p].size() - released[p]);
      released[p] = parts[p].size();
    }
  }
  return parts;
}

}  // namespace gpucache::detail
