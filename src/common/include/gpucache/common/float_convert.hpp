// Widening of the stored types to f32, the type validation computes in. (Narrowing to
// f16/bf16 lives with the validation kernels, kernels/row_checks.cuh, shared by CPU and CUDA.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gpucache/dtype.hpp"

namespace gpucache::detail {

// The float dtypes widen_to_f32 reads: f16, bf16, f32, f64 (the dtype table's floats with a
// to_f32 reader; the fp8 codes are reserved in DType but not read yet).
bool widens_to_f32(DType dtype) noexcept;

// Converts count elements of `from` to f32 with the dtype table's reader (DTypeInfo::to_f32):
// the floats above and the integers, which pack converts when --dtype asks. Throws for a dtype
// without one (bool, fp8).
void widen_to_f32(DType from, const std::byte* in, float* out, std::size_t count);
float f16_bits_to_f32(std::uint16_t bits) noexcept;
float bf16_bits_to_f32(std::uint16_t bits) noexcept;

}  // namespace gpucache::detail
