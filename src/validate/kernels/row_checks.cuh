// Per-row arithmetic shared by the CPU reference (validate_cpu.cpp) and the CUDA kernels
// (validate.cu, convert.cu). Everything here is plain C++ when not compiled by nvcc, so both
// backends run literally the same code for verdicts, hashing, keys and dtype rounding; the only
// backend-specific part is how the 32 lanes are held (an array on the CPU, a warp on the GPU).
// docs/validation.md defines the arithmetic; change both together.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "gpucache/drop_reason.hpp"

#ifdef __CUDACC__
#define GPUCACHE_HD __host__ __device__ __forceinline__
#else
#define GPUCACHE_HD inline
#endif

namespace gpucache::detail {

// Lane count of the canonical reduction: lane l takes elements l, l+32, l+64, ... of a row.
inline constexpr unsigned kLanes = 32;

enum class OutputType : std::uint8_t { f32 = 0, f16 = 1, bf16 = 2 };
enum class OverflowMode : std::uint8_t { drop = 0, clamp = 1, error = 2 };
// The float types rows reach the checks in; each value is widened to f32 first, except that a
// column stored as f64 (f64_kept: not converted) has its sums of squares and dot products taken
// from the f64 values themselves (load_wide), so its finite, nonzero, norm and pair_cos checks
// see what is stored; its largest magnitude and row hash still use the values rounded to f32
// (the overflow check does not apply to it, and dedup compares the rows' values on a match).
enum class InputType : std::uint8_t { f32 = 0, f16 = 1, bf16 = 2, f64 = 3, f64_kept = 4 };

GPUCACHE_HD unsigned input_size(InputType input) {
  return input == InputType::f64 || input == InputType::f64_kept ? 8u
         : input == InputType::f32                               ? 4u
                                                                 : 2u;
}

// The check pass runs per column: one summary per row of that column. The verdicts are folded
// from the summaries in check order (column_verdict below, then Validator).
struct SummaryParams {
  std::uint64_t values = 0;  // per row
  InputType input = InputType::f32;
  std::uint8_t hash = 0;  // compute the row hash (the column has the dedup check)
};

// Lane-reduced summary of one column of one row. The layout is fixed (no implicit padding) so the
// CPU and GPU results can be compared byte for byte.
struct ColumnSummary {
  double sum_squares;  // canonical fp64 sum of squares
  float max_abs;       // largest magnitude
  std::uint32_t padding;
  std::uint64_t hash;  // row hash when asked, else 0
};
static_assert(sizeof(ColumnSummary) == 24, "ColumnSummary layout is shared with the GPU");

// The dot product of two columns' rows (the pair cosine), both of `values` values.
struct DotParams {
  std::uint64_t values = 0;
  InputType a = InputType::f32;
  InputType b = InputType::f32;
};

GPUCACHE_HD std::uint32_t float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

GPUCACHE_HD float bits_float(std::uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

GPUCACHE_HD double quiet_nan_double() {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(0x7ff8000000000000LL);
#else
  const std::uint64_t bits = 0x7ff8000000000000ULL;
  double x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

// ---- widening to f32 (integer operations, so both backends give the same bits) ---------------

// Exact: every f16 is an f32. The same bits as widen_to_f32 (gpucache/common/float_convert.hpp).
GPUCACHE_HD std::uint32_t f16_to_f32_bits(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  std::uint32_t significand = half & 0x3ffu;
  if (exponent == 0x1f) return sign | 0x7f800000u | (significand << 13);
  if (exponent != 0) return sign | ((exponent + 112) << 23) | (significand << 13);
  if (significand == 0) return sign;
  // Subnormal f16 (significand * 2^-24): normalise into an f32 normal.
  std::uint32_t f32_exponent = 113;
  while ((significand & 0x400u) == 0) {
    significand <<= 1;
    --f32_exponent;
  }
  return sign | (f32_exponent << 23) | ((significand & 0x3ffu) << 13);
}

// Round to nearest even, as static_cast<float> does on both backends. A NaN is made quiet with its
// sign and top payload bits kept, as x86-64 does (CUDA would give one canonical NaN).
GPUCACHE_HD std::uint32_t f64_to_f32_bits(double value) {
  if (value != value) {
    std::uint64_t bits;
#ifdef __CUDA_ARCH__
    bits = static_cast<std::uint64_t>(__double_as_longlong(value));
#else
    std::memcpy(&bits, &value, sizeof bits);
#endif
    const auto sign = static_cast<std::uint32_t>(bits >> 32) & 0x80000000u;
    return sign | 0x7fc00000u | (static_cast<std::uint32_t>(bits >> 29) & 0x3fffffu);
  }
  return float_bits(static_cast<float>(value));
}

// Value i of a row of f64 values, as it is. The row need not be aligned on the CPU.
GPUCACHE_HD double load_f64(const unsigned char* row, std::uint64_t i) {
  double value;
#ifdef __CUDA_ARCH__
  value = reinterpret_cast<const double*>(row)[i];
#else
  std::memcpy(&value, row + 8 * i, 8);
#endif
  return value;
}

// Value i of a row of `input` values, widened to f32. The row need not be aligned on the CPU.
GPUCACHE_HD float load_value(const unsigned char* row, InputType input, std::uint64_t i) {
  switch (input) {
    case InputType::f32: {
      std::uint32_t bits;
#ifdef __CUDA_ARCH__
      bits = reinterpret_cast<const std::uint32_t*>(row)[i];
#else
      std::memcpy(&bits, row + 4 * i, 4);
#endif
      return bits_float(bits);
    }
    case InputType::f16:
    case InputType::bf16: {
      std::uint16_t bits;
#ifdef __CUDA_ARCH__
      bits = reinterpret_cast<const std::uint16_t*>(row)[i];
#else
      std::memcpy(&bits, row + 2 * i, 2);
#endif
      return bits_float(input == InputType::f16 ? f16_to_f32_bits(bits)
                                                : static_cast<std::uint32_t>(bits) << 16);
    }
    case InputType::f64:
    case InputType::f64_kept:
      return bits_float(f64_to_f32_bits(load_f64(row, i)));
  }
  return 0.0f;
}

// a * b rounded once, never fused with the sum it is added to (nvcc contracts a * b + c into an
// FMA by default): the same bits on both backends also for f64_kept values, whose products are
// not exact in f64 as f32 values' are.
GPUCACHE_HD double product(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// Value i in the precision the sums use: the f64 value of an f64_kept row, else load_value's f32
// (exact in f64, so the sums of the other types are unchanged).
GPUCACHE_HD double load_wide(const unsigned char* row, InputType input, std::uint64_t i) {
  if (input == InputType::f64_kept) return load_f64(row, i);
  return static_cast<double>(load_value(row, input, i));
}

// ---- hashing and keys -------------------------------------------------------------------------

// splitmix64's finaliser: a full-avalanche bijection on 64 bits.
GPUCACHE_HD std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Row hash, lane part: h <- (h ^ bits) * odd. Each step is a bijection of h, so two rows that
// differ in a single element never collide within a lane; collisions are byte-checked anyway.
inline constexpr std::uint64_t kHashMultiplier = 0x9e3779b97f4a7c15ULL;
GPUCACHE_HD std::uint64_t hash_lane_init(unsigned lane) {
  return 0x243f6a8885a308d3ULL + lane * 0x13198a2e03707344ULL;
}
GPUCACHE_HD std::uint64_t hash_step(std::uint64_t h, std::uint32_t bits) {
  return (h ^ bits) * kHashMultiplier;
}
// Combines lane l (low) with lane l+offset (high) in the reduction tree; asymmetric on purpose,
// so that moving an element to another lane changes the hash.
GPUCACHE_HD std::uint64_t hash_combine(std::uint64_t low, std::uint64_t high) {
  return mix64(low ^ mix64(high + 0x9e3779b97f4a7c15ULL));
}
GPUCACHE_HD std::uint64_t hash_finish(std::uint64_t h, std::uint64_t dim) {
  return mix64(h ^ dim);
}

// Keys for sampling and shuffling: counter-based, so any backend and any batch order gives the
// same key for a (seed, purpose, row). The row is avalanched before the seed enters, so nearby
// seeds give unrelated orders.
inline constexpr std::uint64_t kPurposeSample = 0x73616d706c650001ULL;
inline constexpr std::uint64_t kPurposeShuffle = 0x73687566666c0002ULL;
GPUCACHE_HD std::uint64_t row_key(std::uint64_t seed, std::uint64_t purpose, std::uint64_t row) {
  return mix64(mix64(row + 0x9e3779b97f4a7c15ULL) ^ mix64(seed ^ purpose));
}

// ---- canonical reduction on a lane array (the CPU side; the GPU uses warp shuffles) -----------

// Pairwise tree over 32 lanes: lanes l and l+16, then l and l+8, ... the order of a
// shuffle-down reduction. Addition is commutative in IEEE arithmetic, so only the tree matters.
GPUCACHE_HD double tree_sum(double* lanes) {
  for (unsigned offset = kLanes / 2; offset > 0; offset /= 2)
    for (unsigned l = 0; l < offset; ++l) lanes[l] = lanes[l] + lanes[l + offset];
  return lanes[0];
}
GPUCACHE_HD float tree_max(float* lanes) {
  for (unsigned offset = kLanes / 2; offset > 0; offset /= 2)
    for (unsigned l = 0; l < offset; ++l)
      lanes[l] = lanes[l] < lanes[l + offset] ? lanes[l + offset] : lanes[l];
  return lanes[0];
}
GPUCACHE_HD std::uint64_t tree_hash(std::uint64_t* lanes) {
  for (unsigned offset = kLanes / 2; offset > 0; offset /= 2)
    for (unsigned l = 0; l < offset; ++l) lanes[l] = hash_combine(lanes[l], lanes[l + offset]);
  return lanes[0];
}

// ---- f32 -> f16 / bf16 rounding (round to nearest, ties to even) ------------------------------

// Integer-only so both backends give the same bits whatever their intrinsics do.
struct Converted {
  std::uint16_t bits;
  bool overflowed;  // finite input became infinite
  bool flushed;     // nonzero input became (signed) zero
};

GPUCACHE_HD std::uint32_t shift_right_rne(std::uint32_t value, unsigned shift) {
  const std::uint32_t kept = value >> shift;
  const std::uint32_t remainder = value & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  return kept + ((remainder > half || (remainder == half && (kept & 1u))) ? 1u : 0u);
}

GPUCACHE_HD Converted f32_to_f16(std::uint32_t x) {
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u)  // NaN: stays a quiet NaN with the top payload bits
    return {static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu)), false,
            false};
  if (magnitude >= 0x477ff000u)  // >= 65520 rounds past 65504; includes infinity
    return {static_cast<std::uint16_t>(sign | 0x7c00u), magnitude != 0x7f800000u, false};
  if (magnitude >= 0x38800000u) {  // normal f16 (>= 2^-14): rebias the exponent, round 13 bits
    const std::uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return {static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13)), false, false};
  }
  if (magnitude <= 0x33000000u)  // <= 2^-25: rounds to zero (the tie 2^-25 goes to even 0)
    return {sign, false, magnitude != 0};
  // f16 subnormal k * 2^-24 from f32 m * 2^(e-150): k = m >> (126 - e), 14 <= shift <= 24.
  const std::uint32_t exponent = magnitude >> 23;
  const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  return {static_cast<std::uint16_t>(sign | shift_right_rne(mantissa, 126u - exponent)), false,
          false};
}

GPUCACHE_HD Converted f32_to_bf16(std::uint32_t x) {
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u)  // NaN: keep sign and top payload bits, force quiet
    return {static_cast<std::uint16_t>((x >> 16) | 0x0040u), false, false};
  if (magnitude >= 0x7f7f8000u)  // rounds past the largest bf16; includes infinity
    return {static_cast<std::uint16_t>(((x >> 16) & 0x8000u) | 0x7f80u), magnitude != 0x7f800000u,
            false};
  const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  const auto bits = static_cast<std::uint16_t>(rounded >> 16);
  return {bits, false, magnitude != 0 && (bits & 0x7fffu) == 0};
}

GPUCACHE_HD Converted convert_bits(std::uint32_t x, OutputType output) {
  return output == OutputType::f16 ? f32_to_f16(x) : f32_to_bf16(x);
}

// Largest finite value of the output type, for on_overflow=clamp.
GPUCACHE_HD std::uint16_t max_finite_bits(OutputType output) {
  return output == OutputType::f16 ? 0x7bffu : 0x7f7fu;
}

// Element value after normalisation: one fp64 division by the canonical norm, one rounding to
// f32. Rows whose norm is zero or not finite are left as they are (they never pass validation;
// this keeps the standalone conversion free of NaN payload differences between backends).
GPUCACHE_HD bool normalizable(double norm) {
  return norm > 0.0 && norm < INFINITY;
}
GPUCACHE_HD float normalize_value(float x, double norm) {
  return static_cast<float>(static_cast<double>(x) / norm);
}

// Parameters of the conversion pass (pass 2).
struct ConvertParams {
  std::uint64_t dim = 0;
  std::uint64_t padded_dim = 0;  // row pitch in elements; pad elements are written as zero
  OutputType output = OutputType::f32;
  std::uint8_t normalize = 0;
  OverflowMode on_overflow = OverflowMode::error;
};

inline constexpr std::uint64_t kNoRow = ~std::uint64_t{0};
struct ConvertCounts {
  std::uint64_t overflowed = 0;  // finite values that rounded to infinity (before clamping)
  std::uint64_t flushed = 0;     // nonzero values that rounded to zero
  std::uint64_t first_overflow_row = kNoRow;  // lowest row (of this call) with an overflow
};

// One element of pass 2 in a 16-bit output type; `overflowed`/`flushed` are incremented.
GPUCACHE_HD std::uint16_t convert_element(float x, OutputType output, OverflowMode on_overflow,
                                          std::uint32_t& overflowed, std::uint32_t& flushed) {
  const Converted converted = convert_bits(float_bits(x), output);
  overflowed += converted.overflowed;
  flushed += converted.flushed;
  if (converted.overflowed && on_overflow == OverflowMode::clamp)
    return static_cast<std::uint16_t>((converted.bits & 0x8000u) | max_finite_bits(output));
  return converted.bits;
}

// ---- verdict ----------------------------------------------------------------------------------

GPUCACHE_HD double norm_of(double sum_squares) {
  // A NaN's payload differs between backends; report one canonical NaN instead.
  return sum_squares != sum_squares ? quiet_nan_double() : sqrt(sum_squares);
}

// Pass 2 of a column stored as f64 (an f64 input kept as f64, checked as f64_kept): the values stay
// as they are, or, normalised, are each divided in f64 by the norm of the same canonical sum the
// checks took (lane l sums the products of values l, l+32, ..., then tree_sum), rounded once; pad
// elements are zero. Nothing is narrowed, so both backends give the same bits with no rounding
// rule of their own (RowConverter runs it on the host for either).
GPUCACHE_HD double sum_squares_f64(const double* row, std::uint64_t dim) {
  double lanes[kLanes];
  for (unsigned l = 0; l < kLanes; ++l) lanes[l] = 0.0;
  for (std::uint64_t i = 0; i < dim; ++i)
    lanes[i % kLanes] = lanes[i % kLanes] + product(row[i], row[i]);
  return tree_sum(lanes);
}
GPUCACHE_HD void convert_row_f64(const double* in, std::uint64_t dim, std::uint64_t padded_dim,
                                 bool normalize, double* out) {
  const double norm = normalize ? norm_of(sum_squares_f64(in, dim)) : 0.0;
  const bool scale = normalize && normalizable(norm);
  for (std::uint64_t i = 0; i < dim; ++i) out[i] = scale ? in[i] / norm : in[i];
  for (std::uint64_t i = dim; i < padded_dim; ++i) out[i] = 0.0;
}

// One column's checks as the verdict needs them.
struct ColumnRule {
  std::uint8_t finite = 0, nonzero = 0, norm = 0;
  double norm_min = 0.0;       // with norm: inclusive; 0 is no lower bound
  double norm_max = INFINITY;  // with norm: inclusive; infinity is no upper bound
  OutputType output = OutputType::f32;
  std::uint8_t normalize = 0;  // stored at unit norm: never overflows
};

// The first of the column's own row-level checks that fails, in check order (kChecks in
// gpucache/checks.hpp): finite (nan_inf), nonzero (zero), norm (norm_low, then norm_high). The
// row's verdict is the failure first in check order over all its columns, the lowest column first
// among equals (Validator); pair_cos, duplicate and overflow follow. A NaN norm fails neither norm
// bound: that is the finite check's business.
GPUCACHE_HD DropReason column_verdict(const ColumnRule& rule, double sum_squares, double norm) {
  if (rule.finite && !(sum_squares < INFINITY)) return DropReason::nan_inf;
  if (rule.nonzero && sum_squares == 0.0) return DropReason::zero;
  if (rule.norm && norm < rule.norm_min) return DropReason::norm_low;
  if (rule.norm && norm > rule.norm_max) return DropReason::norm_high;
  return DropReason::kept;
}

// Whether storing the row overflows the column's output type. Rounding is monotonic, so the row
// overflows exactly when its largest magnitude does. Normalised values are at most 1 in magnitude
// and never overflow.
GPUCACHE_HD bool column_overflows(const ColumnRule& rule, float max_abs) {
  return rule.output != OutputType::f32 && !rule.normalize &&
         convert_bits(float_bits(max_abs), rule.output).overflowed;
}

}  // namespace gpucache::detail
