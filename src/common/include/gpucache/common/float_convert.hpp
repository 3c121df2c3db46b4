// Widening of the float storage types to f32, the type validation computes in. (Narrowing to
// f16/bf16 lives with the validation kernels, kernels/row_checks.cuh, shared by CPU and CUDA.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gpucache/dtype.hpp"

namespace gpucache::detail {

// Converts count elements of `from` (f16, bf16, f32 or f64) to f32.
void widen_to_f32(DType from, const std::byte* in, float* out, std::size_t count);
float f16_bits_to_f32(std::uint16_t bits) noexcept;
float bf16_bits_to_f32(std::uint16_t bits) noexcept;

}  // namespace gpucache::detail
