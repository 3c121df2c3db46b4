// Widening of the float storage types to f32, the type validation computes in. (Narrowing to
// f16/bf16 lives with the validation kernels, kernels/row_checks.cuh, shared by CPU and CUDA.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gpucache/dtype.hpp"

namespace gpucache::detail {

// The float storage types widen_to_f32 reads: f16, bf16, f32, f64. (The fp8 codes are reserved
// in DType but not read yet.)
inline bool widens_to_f32(DType dtype) noexcept {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::f64;
}

// Converts count elements of `from` (f16, bf16, f32 or f64) to f32.
void widen_to_f32(DType from, const std::byte* in, float* out, std::size_t count);
float f16_bits_to_f32(std::uint16_t bits) noexcept;
float bf16_bits_to_f32(std::uint16_t bits) noexcept;

}  // namespace gpucache::detail
