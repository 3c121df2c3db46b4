#include "gpucache/detail/float_convert.hpp"

#include <bit>
#include <cstring>

#include "gpucache/error.hpp"

namespace gpucache::detail {

std::uint16_t f32_to_f16_bits(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN stays NaN
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (magnitude < 0x38800000u) {
    // Result is subnormal or zero in f16: shift the full significand into place, then round.
    if (magnitude < 0x33000000u) return static_cast<std::uint16_t>(sign);
    const std::uint32_t exponent = magnitude >> 23;
    const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // 14..24
    std::uint32_t result = significand >> shift;
    const std::uint32_t remainder = significand & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return static_cast<std::uint16_t>(sign | result);
  }
  // Normal: rebias the exponent and round the 13 dropped significand bits to nearest even.
  std::uint32_t result = (magnitude - 0x38000000u) >> 13;
  const std::uint32_t remainder = magnitude & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return static_cast<std::uint16_t>(sign | result);
}

std::uint16_t f32_to_bf16_bits(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

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

void narrow_from_f32(DType to, const float* in, std::byte* out, std::size_t count) {
  switch (to) {
    case DType::f32:
      std::memcpy(out, in, count * 4);
      return;
    case DType::f16:
    case DType::bf16:
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint16_t bits =
            to == DType::f16 ? f32_to_f16_bits(in[i]) : f32_to_bf16_bits(in[i]);
        std::memcpy(out + 2 * i, &bits, 2);
      }
      return;
    case DType::f64:
      for (std::size_t i = 0; i < count; ++i) {
        const double value = in[i];
        std::memcpy(out + 8 * i, &value, 8);
      }
      return;
    default:
      throw Error("", "", std::string("cannot convert f32 to ") + std::string(dtype_name(to)));
  }
}

}  // namespace gpucache::detail
