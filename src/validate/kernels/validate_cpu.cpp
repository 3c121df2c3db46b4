#include "kernels/validate_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "gpucache/common/parallel.hpp"

namespace gpucache::detail {
namespace {

// Below this many input floats per thread, starting a thread costs more than it saves.
constexpr std::uint64_t kFloatsPerThread = 1 << 16;

// The lanes live in fixed-size arrays and every statement of the block loop is independent per
// lane, so the compiler vectorises across lanes without reassociating any sum.
struct Lanes {
  alignas(64) double sums[kLanes];
  alignas(64) float maxes[kLanes];
  alignas(64) std::uint64_t hashes[kLanes];
};

// `wide`: the values in f64 when they are more precise than `block` (an f64_kept row), else null.
template <bool kHash, bool kWide = false>
[[gnu::always_inline]] inline void accumulate(Lanes& lanes, const float* block, unsigned count,
                                              const double* wide_block = nullptr) {
  for (unsigned l = 0; l < count; ++l) {
    const float x = block[l];
    const double wide = kWide ? wide_block[l] : x;
    lanes.sums[l] += wide * wide;  // exact product: f32 x f32 fits in the fp64 mantissa
    const float magnitude = std::fabs(x);
    lanes.maxes[l] = lanes.maxes[l] < magnitude ? magnitude : lanes.maxes[l];
    if constexpr (kHash) lanes.hashes[l] = hash_step(lanes.hashes[l], float_bits(x));
  }
}

template <bool kHash>
ColumnSummary summarize(const float* row, std::uint64_t dim) {
  Lanes lanes;
  for (unsigned l = 0; l < kLanes; ++l) {
    lanes.sums[l] = 0.0;
    lanes.maxes[l] = 0.0f;
    lanes.hashes[l] = hash_lane_init(l);
  }
  const std::uint64_t full = dim - dim % kLanes;
  for (std::uint64_t i = 0; i < full; i += kLanes) accumulate<kHash>(lanes, row + i, kLanes);
  // Lanes past the tail keep their initial state, like idle lanes of a warp.
  accumulate<kHash>(lanes, row + full, static_cast<unsigned>(dim - full));
  ColumnSummary summary;
  summary.sum_squares = tree_sum(lanes.sums);
  summary.max_abs = tree_max(lanes.maxes);
  summary.padding = 0;
  summary.hash = kHash ? hash_finish(tree_hash(lanes.hashes), dim) : 0;
  return summary;
}

double sum_squares(const float* row, std::uint64_t dim) {
  alignas(64) double sums[kLanes] = {};
  const std::uint64_t full = dim - dim % kLanes;
  for (std::uint64_t i = 0; i < full; i += kLanes)
    for (unsigned l = 0; l < kLanes; ++l) {
      const double wide = row[i + l];
      sums[l] += wide * wide;
    }
  for (unsigned l = 0; l < dim - full; ++l) {
    const double wide = row[full + l];
    sums[l] += wide * wide;
  }
  return tree_sum(sums);
}

// The common case, branch-free so it vectorises: every value of the row is finite and does not
// overflow (f16: |x| < 65520; bf16: below the largest bf16 and not flushed to zero). For f16 the
// normal, subnormal and flush-to-zero results are all computed and the right one selected; the
// arithmetic is exactly that of the matching branch of f32_to_f16 / f32_to_bf16 in
// row_checks.cuh, so the bits are the same. Values flushed to zero are added to `flushed`. A row
// with any other value returns false and takes the general path.
// Cloned for AVX2 (picked at load time by the CPU): the same integer arithmetic, 8 lanes wide.
__attribute__((target_clones("avx2", "default"))) bool convert_row_common_range(
    OutputType output, const float* in, std::uint16_t* out, std::uint64_t dim,
    std::uint32_t& flushed) {
  const auto* bits = reinterpret_cast<const std::uint32_t*>(in);
  std::uint32_t outside = 0;
  if (output == OutputType::f16) {
    std::uint32_t flushed_here = 0;
    for (std::uint64_t i = 0; i < dim; ++i) {
      const std::uint32_t magnitude = bits[i] & 0x7fffffffu;
      outside |= static_cast<std::uint32_t>(magnitude >= 0x477ff000u);
      // Normal f16 (>= 2^-14): rebias the exponent, round 13 bits.
      const std::uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
      const std::uint32_t normal = (rounded - 0x38000000u) >> 13;
      // Subnormal f16: the mantissa shifted right by 126 - exponent (14..24 where it applies;
      // clamped so the other lanes compute something harmless), rounded to nearest even.
      const std::int32_t exponent = static_cast<std::int32_t>(magnitude >> 23);
      const auto shift = static_cast<std::uint32_t>(std::clamp(126 - exponent, 1, 31));
      const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
      const std::uint32_t kept = mantissa >> shift;
      const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
      const std::uint32_t half = 1u << (shift - 1u);
      const std::uint32_t subnormal =
          kept + static_cast<std::uint32_t>(remainder > half || (remainder == half && (kept & 1u)));
      const bool is_normal = magnitude >= 0x38800000u;
      const bool is_zero = magnitude <= 0x33000000u;  // <= 2^-25 rounds to zero
      flushed_here += static_cast<std::uint32_t>(is_zero && magnitude != 0);
      const std::uint32_t value = is_normal ? normal : (is_zero ? 0u : subnormal);
      out[i] = static_cast<std::uint16_t>(((bits[i] >> 16) & 0x8000u) | value);
    }
    flushed += flushed_here;
  } else {
    for (std::uint64_t i = 0; i < dim; ++i) {
      const std::uint32_t magnitude = bits[i] & 0x7fffffffu;
      const std::uint32_t rounded = (bits[i] + 0x7fffu + ((bits[i] >> 16) & 1u)) >> 16;
      // Not NaN/inf/overflowing, and not a nonzero value that rounds to zero.
      outside |= static_cast<std::uint32_t>(magnitude >= 0x7f7f8000u ||
                                            (magnitude != 0 && (rounded & 0x7fffu) == 0));
      out[i] = static_cast<std::uint16_t>(rounded);
    }
  }
  return outside == 0;
}

// Converts one row; returns whether any value overflowed.
bool convert_row(const ConvertParams& params, const float* in, std::byte* out,
                 ConvertCounts& counts) {
  double norm = 0.0;
  const bool scale = params.normalize && normalizable(norm = norm_of(sum_squares(in, params.dim)));
  const std::uint64_t dim = params.dim;
  if (params.output == OutputType::f32) {
    auto* values = reinterpret_cast<float*>(out);
    if (scale)
      for (std::uint64_t i = 0; i < dim; ++i) values[i] = normalize_value(in[i], norm);
    else
      std::memcpy(values, in, dim * sizeof(float));
    std::memset(values + dim, 0, (params.padded_dim - dim) * sizeof(float));
    return false;
  }
  auto* values = reinterpret_cast<std::uint16_t*>(out);
  std::uint32_t overflowed = 0, flushed = 0;
  std::uint32_t flushed_common = 0;
  if (!scale && convert_row_common_range(params.output, in, values, dim, flushed_common)) {
    std::memset(values + dim, 0, (params.padded_dim - dim) * sizeof(std::uint16_t));
    counts.flushed += flushed_common;
    return false;
  }
  for (std::uint64_t i = 0; i < dim; ++i) {
    const float x = scale ? normalize_value(in[i], norm) : in[i];
    values[i] = convert_element(x, params.output, params.on_overflow, overflowed, flushed);
  }
  std::memset(values + dim, 0, (params.padded_dim - dim) * sizeof(std::uint16_t));
  counts.overflowed += overflowed;
  counts.flushed += flushed;
  return overflowed != 0;
}

}  // namespace

ColumnSummary cpu_summarize(const float* row, std::uint64_t dim, bool with_hash) {
  return with_hash ? summarize<true>(row, dim) : summarize<false>(row, dim);
}

double cpu_dot(const float* a, const float* b, std::uint64_t dim) {
  alignas(64) double sums[kLanes] = {};
  const std::uint64_t full = dim - dim % kLanes;
  for (std::uint64_t i = 0; i < full; i += kLanes)
    for (unsigned l = 0; l < kLanes; ++l)
      sums[l] += static_cast<double>(a[i + l]) * static_cast<double>(b[i + l]);
  for (unsigned l = 0; l < dim - full; ++l)
    sums[l] += static_cast<double>(a[full + l]) * static_cast<double>(b[full + l]);
  return tree_sum(sums);
}

namespace {

// Below this many values per thread, starting a thread costs more than it saves.
std::uint64_t grain_for(std::uint64_t values) {
  return std::max<std::uint64_t>(1, kFloatsPerThread / std::max<std::uint64_t>(values, 1));
}

bool f32_aligned(InputType input, const std::byte* row) {
  return input == InputType::f32 && reinterpret_cast<std::uintptr_t>(row) % alignof(float) == 0;
}

// Rows of another type (or f32 rows at an odd address) are widened 32 values at a time into the
// block the lanes read, so each lane still takes values l, l+32, ... in order.
template <bool kHash>
ColumnSummary summarize_widened(const std::byte* row, InputType input, std::uint64_t values) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(row);
  Lanes lanes;
  for (unsigned l = 0; l < kLanes; ++l) {
    lanes.sums[l] = 0.0;
    lanes.maxes[l] = 0.0f;
    lanes.hashes[l] = hash_lane_init(l);
  }
  alignas(64) float block[kLanes];
  alignas(64) double wide[kLanes];
  for (std::uint64_t i = 0; i < values; i += kLanes) {
    const auto count = static_cast<unsigned>(std::min<std::uint64_t>(kLanes, values - i));
    for (unsigned l = 0; l < count; ++l) block[l] = load_value(bytes, input, i + l);
    if (input == InputType::f64_kept) {
      for (unsigned l = 0; l < count; ++l) wide[l] = load_wide(bytes, input, i + l);
      accumulate<kHash, true>(lanes, block, count, wide);
    } else {
      accumulate<kHash>(lanes, block, count);
    }
  }
  ColumnSummary summary;
  summary.sum_squares = tree_sum(lanes.sums);
  summary.max_abs = tree_max(lanes.maxes);
  summary.padding = 0;
  summary.hash = kHash ? hash_finish(tree_hash(lanes.hashes), values) : 0;
  return summary;
}

ColumnSummary summarize_row(const SummaryParams& params, const std::byte* row) {
  if (f32_aligned(params.input, row))
    return cpu_summarize(reinterpret_cast<const float*>(row), params.values, params.hash);
  return params.hash ? summarize_widened<true>(row, params.input, params.values)
                     : summarize_widened<false>(row, params.input, params.values);
}

double dot_row(const DotParams& params, const std::byte* a, const std::byte* b) {
  if (f32_aligned(params.a, a) && f32_aligned(params.b, b))
    return cpu_dot(reinterpret_cast<const float*>(a), reinterpret_cast<const float*>(b),
                   params.values);
  const auto* a_bytes = reinterpret_cast<const unsigned char*>(a);
  const auto* b_bytes = reinterpret_cast<const unsigned char*>(b);
  alignas(64) double sums[kLanes] = {};
  for (std::uint64_t i = 0; i < params.values; ++i)
    sums[i % kLanes] += product(load_wide(a_bytes, params.a, i), load_wide(b_bytes, params.b, i));
  return tree_sum(sums);
}

}  // namespace

void cpu_summarize_rows(const SummaryParams& params, const std::byte* rows, std::uint64_t count,
                        ColumnSummary* out, unsigned threads) {
  const std::uint64_t pitch = params.values * input_size(params.input);
  parallel_for(count, threads, grain_for(params.values),
               [&](std::uint64_t begin, std::uint64_t end) {
                 for (std::uint64_t r = begin; r < end; ++r)
                   out[r] = summarize_row(params, rows + r * pitch);
               });
}

void cpu_summarize_row_pointers(const SummaryParams& params, const std::byte* const* rows,
                                std::uint64_t count, ColumnSummary* out, unsigned threads) {
  parallel_for(count, threads, grain_for(params.values),
               [&](std::uint64_t begin, std::uint64_t end) {
                 for (std::uint64_t r = begin; r < end; ++r)
                   out[r] = summarize_row(params, rows[r]);
               });
}

void cpu_dot_rows(const DotParams& params, const std::byte* a, const std::byte* b,
                  std::uint64_t count, double* out, unsigned threads) {
  const std::uint64_t a_pitch = params.values * input_size(params.a);
  const std::uint64_t b_pitch = params.values * input_size(params.b);
  parallel_for(count, threads, grain_for(2 * params.values),
               [&](std::uint64_t begin, std::uint64_t end) {
                 for (std::uint64_t r = begin; r < end; ++r)
                   out[r] = dot_row(params, a + r * a_pitch, b + r * b_pitch);
               });
}

void cpu_dot_row_pointers(const DotParams& params, const std::byte* const* a,
                          const std::byte* const* b, std::uint64_t count, double* out,
                          unsigned threads) {
  parallel_for(count, threads, grain_for(2 * params.values),
               [&](std::uint64_t begin, std::uint64_t end) {
                 for (std::uint64_t r = begin; r < end; ++r) out[r] = dot_row(params, a[r], b[r]);
               });
}

ConvertCounts cpu_convert_rows(const ConvertParams& params, const float* in, std::uint64_t rows,
                               std::byte* out, unsigned threads) {
  const std::size_t element_size = params.output == OutputType::f32 ? 4 : 2;
  const std::uint64_t pitch = params.padded_dim * element_size;
  const std::uint64_t grain = std::max<std::uint64_t>(1, kFloatsPerThread / params.padded_dim);
  ConvertCounts total;
  std::mutex total_mutex;
  parallel_for(rows, threads, grain, [&](std::uint64_t begin, std::uint64_t end) {
    ConvertCounts counts;
    for (std::uint64_t r = begin; r < end; ++r)
      if (convert_row(params, in + r * params.dim, out + r * pitch, counts) &&
          counts.first_overflow_row == kNoRow)
        counts.first_overflow_row = r;
    std::lock_guard lock(total_mutex);
    total.overflowed += counts.overflowed;
    total.flushed += counts.flushed;
    total.first_overflow_row = std::min(total.first_overflow_row, counts.first_overflow_row);
  });
  return total;
}

void cpu_convert_rows_f64(const double* in, std::uint64_t rows, std::uint64_t dim,
                          std::uint64_t padded_dim, bool normalize, double* out, unsigned threads) {
  const std::uint64_t grain = std::max<std::uint64_t>(1, kFloatsPerThread / padded_dim);
  parallel_for(rows, threads, grain, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t r = begin; r < end; ++r)
      convert_row_f64(in + r * dim, dim, padded_dim, normalize, out + r * padded_dim);
  });
}

}  // namespace gpucache::detail
