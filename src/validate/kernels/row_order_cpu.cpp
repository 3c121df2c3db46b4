// CPU reference of the ordering steps (dedup grouping, sampling, shuffle): a parallel merge sort
// on (key, row). The order is total, so any correct sort, CUB's radix sort included, agrees.
#include <algorithm>
#include <vector>

#include "gpucache/common/parallel.hpp"
#include "kernels/validate_cpu.hpp"

namespace gpucache::detail {
namespace {

struct KeyRow {
  std::uint64_t key, row;
  bool operator<(const KeyRow& other) const {
    return key != other.key ? key < other.key : row < other.row;
  }
};

constexpr std::uint64_t kSortGrain = 1 << 16;

// Sorts runs in parallel, then merges neighbouring runs pairwise until one is left.
void parallel_sort(std::vector<KeyRow>& items, unsigned threads) {
  const std::uint64_t count = items.size();
  const auto runs = static_cast<unsigned>(std::min<std::uint64_t>(
      std::max(threads, 1u), std::max<std::uint64_t>(1, count / kSortGrain)));
  if (runs <= 1) {
    std::sort(items.begin(), items.end());
    return;
  }
  std::vector<std::uint64_t> bounds(runs + 1);
  for (unsigned run = 0; run <= runs; ++run) bounds[run] = count * run / runs;
  parallel_for(runs, runs, 1, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t run = begin; run < end; ++run)
      std::sort(items.begin() + bounds[run], items.begin() + bounds[run + 1]);
  });
  std::vector<KeyRow> scratch(count);
  while (bounds.size() > 2) {
    const std::uint64_t pairs = (bounds.size() - 1) / 2;
    std::vector<std::uint64_t> merged{0};
    parallel_for(pairs, threads, 1, [&](std::uint64_t begin, std::uint64_t end) {
      for (std::uint64_t pair = begin; pair < end; ++pair) {
        const auto first = bounds[2 * pair], middle = bounds[2 * pair + 1],
                   last = bounds[2 * pair + 2];
        std::merge(items.begin() + first, items.begin() + middle, items.begin() + middle,
                   items.begin() + last, scratch.begin() + first);
      }
    });
    for (std::uint64_t pair = 0; pair < pairs; ++pair) merged.push_back(bounds[2 * pair + 2]);
    if ((bounds.size() - 1) % 2 == 1) {  // an odd run out: carried over unchanged
      std::copy(items.begin() + bounds[bounds.size() - 2], items.end(),
                scratch.begin() + bounds[bounds.size() - 2]);
      merged.push_back(count);
    }
    items.swap(scratch);
    bounds = std::move(merged);
  }
}

}  // namespace

void cpu_sort_by_key(std::uint64_t* keys, std::uint64_t* values, std::uint64_t count,
                     unsigned threads) {
  std::vector<KeyRow> items(count);
  for (std::uint64_t i = 0; i < count; ++i) items[i] = {keys[i], values[i]};
  parallel_sort(items, threads);
  for (std::uint64_t i = 0; i < count; ++i) {
    keys[i] = items[i].key;
    values[i] = items[i].row;
  }
}

std::uint64_t cpu_order_selected_rows(const std::uint8_t* selected, std::uint64_t count,
                                      bool by_key, std::uint64_t seed, std::uint64_t purpose,
                                      std::uint64_t* out, unsigned threads) {
  if (!by_key) {
    std::uint64_t kept = 0;
    for (std::uint64_t r = 0; r < count; ++r)
      if (selected[r]) out[kept++] = r;
    return kept;
  }
  std::vector<KeyRow> items;
  for (std::uint64_t r = 0; r < count; ++r)
    if (selected[r]) items.push_back({row_key(seed, purpose, r), r});
  parallel_sort(items, threads);
  for (std::uint64_t i = 0; i < items.size(); ++i) out[i] = items[i].row;
  return items.size();
}

}  // namespace gpucache::detail
