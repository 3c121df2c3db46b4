// The canonical lane reduction on a warp: shuffle-down by 16, 8, 4, 2, 1, so lane l adds lane
// l + offset, exactly the tree of tree_sum()/tree_hash() in row_checks.cuh. The result is valid
// in lane 0. CUDA translation units only.
#pragma once

#include <cstdint>

#include "kernels/row_checks.cuh"

namespace gpucache::detail {

inline constexpr unsigned kFullWarp = 0xffffffffu;

__device__ __forceinline__ double warp_sum(double value) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    value = value + __shfl_down_sync(kFullWarp, value, offset);
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_down_sync(kFullWarp, value, offset));
  return value;
}

__device__ __forceinline__ std::uint64_t warp_hash(std::uint64_t hash) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    const auto high = static_cast<std::uint64_t>(
        __shfl_down_sync(kFullWarp, static_cast<unsigned long long>(hash), offset));
    hash = hash_combine(hash, high);
  }
  return hash;
}

__device__ __forceinline__ unsigned long long warp_count(unsigned long long value) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    value += __shfl_down_sync(kFullWarp, value, offset);
  return value;
}

// Lane part of the canonical sum of squares of one row, then the warp reduction.
__device__ __forceinline__ double warp_sum_squares(const float* __restrict__ row, std::uint64_t dim,
                                                   unsigned lane) {
  double sum = 0.0;
#pragma unroll 4
  for (std::uint64_t i = lane; i < dim; i += kLanes) {
    const double wide = row[i];
    sum += wide * wide;  // exact product, so a fused multiply-add rounds the same
  }
  return warp_sum(sum);
}

}  // namespace gpucache::detail
