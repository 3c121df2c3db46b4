#include "gpucache/common/float_convert.hpp"

#include <bit>
#include <cstring>
#include <string>

#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/error.hpp"

namespace gpucache::detail {

float f16_bits_to_f32(std::uint16_t half) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  std::uint32_t exponent = (half >> 10) & 0x1fu;
  std::uint32_t significand = half & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (significand << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (significand << 13);
  } else if (significand == 0) {
    bits = sign;
  } else {
    // Subnormal f16: normalise into an f32 normal.
    exponent = 113;
    while ((significand & 0x400u) == 0) {
      significand <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((significand & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

float bf16_bits_to_f32(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

void widen_to_f32(DType from, const std::byte* in, float* out, std::size_t count) {
  const DTypeInfo* info = dtype_info(from);
  if (info == nullptr || info->to_f32 == nullptr)
    throw Error("", "", std::string("cannot convert ") + std::string(dtype_name(from)) + " to f32");
  info->to_f32(in, out, count);
}

bool widens_to_f32(DType dtype) noexcept {
  const DTypeInfo* info = dtype_info(dtype);
  return info != nullptr && info->is_float && info->to_f32 != nullptr;
}

}  // namespace gpucache::detail
