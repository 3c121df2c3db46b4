// CUDA launchers of the ordering steps: CUB compaction and radix sort. No CUDA types.
#pragma once

#include <cstdint>

namespace gpucache::detail {

// Both return false, having done nothing, when the device lacks the memory for the whole
// array; the caller then runs the CPU reference, which gives the same order.

// Same contract as cpu_sort_by_key(); `values` must be ascending on entry (the radix sort is
// stable, so equal keys then stay in value order, which is the (key, value) order).
bool cuda_sort_by_key(std::uint64_t* keys, std::uint64_t* values, std::uint64_t count);

// Same contract as cpu_order_selected_rows(): compaction with cub::DeviceSelect, keys from
// row_key(), then cub::DeviceRadixSort. The number of rows written goes to *written.
bool cuda_order_selected_rows(const std::uint8_t* selected, std::uint64_t count, bool by_key,
                              std::uint64_t seed, std::uint64_t purpose, std::uint64_t* out,
                              std::uint64_t* written);

}  // namespace gpucache::detail
