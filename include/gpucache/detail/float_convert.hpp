// Conversions between the float storage types and f32, the type validation computes in. Narrowing
// rounds to nearest even on the bit patterns, so every backend produces identical bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gpucache/dtype.hpp"

namespace gpucache::detail {

// Converts count elements of `from` (any float type, or an integer type) to f32.
void widen_to_f32(DType from, const std::byte* in, float* out, std::size_t count);
// Converts count f32 values to `to` (f32, f16, bf16 or f64).
void narrow_from_f32(DType to, const float* in, std::byte* out, std::size_t count);
std::uint16_t f32_to_f16_bits(float value) noexcept;
std::uint16_t f32_to_bf16_bits(float value) noexcept;
float f16_bits_to_f32(std::uint16_t bits) noexcept;
float bf16_bits_to_f32(std::uint16_t bits) noexcept;

}  // namespace gpucache::detail
