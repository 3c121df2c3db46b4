#include "gpucache/common/float_convert.hpp"

#include <bit>
#include <cstring>

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
  switch (from) {
    case DType::f32:
      std::memcpy(out, in, count * 4);
      return;
    case DType::f16:
    case DType::bf16:
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, in + 2 * i, 2);
        out[i] = from == DType::f16 ? f16_bits_to_f32(bits) : bf16_bits_to_f32(bits);
      }
      return;
    case DType::f64:
      for (std::size_t i = 0; i < count; ++i) {
        double value;
        std::memcpy(&value, in + 8 * i, 8);
        out[i] = static_cast<float>(value);
      }
      return;
    default:
      throw Error("", "",
                  std::string("cannot convert ") + std::string(dtype_name(from)) + " to f32");
  }
}

}  // namespace gpucache::detail
