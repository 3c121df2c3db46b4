// Widening of stored floating-point elements to f32, bit-exact for f16 and bf16 (every value,
// including subnormals, infinities and NaN payloads, has an exact f32 counterpart) and
// round-to-nearest for f64. Inputs are little-endian element bytes, possibly unaligned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gpucache/dtype.hpp"

namespace gpucache::detail {

float f16_to_f32(std::uint16_t bits) noexcept;
float bf16_to_f32(std::uint16_t bits) noexcept;

// True for the dtypes convert_to_f32 accepts: f16, bf16, f32, f64.
bool converts_to_f32(DType dtype) noexcept;
// Converts in.size() / dtype_size(dtype) elements into out, which must have room for that many
// floats; neither side needs any alignment. dtype must satisfy converts_to_f32.
void convert_to_f32(DType dtype, std::span<const std::byte> in, std::byte* out) noexcept;

}  // namespace gpucache::detail
