#include "gpucache/detail/float_convert.hpp"

#include <array>
#include <bit>
#include <cstring>

namespace gpucache::detail {

float f16_to_f32(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  std::uint32_t exponent = (bits >> 10) & 0x1fu;
  std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t result;
  if (exponent == 0x1f) {
    result = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    result = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    result = sign;
  } else {
    // Subnormal half: shift the mantissa up until its leading one becomes the implicit bit.
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    result = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(result);
}

float bf16_to_f32(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

bool converts_to_f32(DType dtype) noexcept {
  return dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::f32 || dtype == DType::f64;
}

namespace {
template <typename T>
T load_le(const std::byte* source) noexcept {
  T value;
  std::memcpy(&value, source, sizeof(T));
  if constexpr (std::endian::native == std::endian::big) {
    auto raw = std::bit_cast<std::array<unsigned char, sizeof(T)>>(value);
    for (std::size_t i = 0; i < sizeof(T) / 2; ++i) std::swap(raw[i], raw[sizeof(T) - 1 - i]);
    value = std::bit_cast<T>(raw);
  }
  return value;
}
}  // namespace

void convert_to_f32(DType dtype, std::span<const std::byte> in, std::byte* out) noexcept {
  const std::byte* source = in.data();
  auto store = [out](std::size_t i, float value) { std::memcpy(out + 4 * i, &value, 4); };
  switch (dtype) {
    case DType::f32:
      if constexpr (std::endian::native == std::endian::little) {
        std::memcpy(out, source, in.size());
      } else {
        for (std::size_t i = 0; i < in.size() / 4; ++i) store(i, load_le<float>(source + 4 * i));
      }
      return;
    case DType::f16:
      for (std::size_t i = 0; i < in.size() / 2; ++i)
        store(i, f16_to_f32(load_le<std::uint16_t>(source + 2 * i)));
      return;
    case DType::bf16:
      for (std::size_t i = 0; i < in.size() / 2; ++i)
        store(i, bf16_to_f32(load_le<std::uint16_t>(source + 2 * i)));
      return;
    case DType::f64:
      for (std::size_t i = 0; i < in.size() / 8; ++i)
        store(i, static_cast<float>(load_le<double>(source + 8 * i)));
      return;
    default:
      return;  // excluded by the precondition
  }
}

}  // namespace gpucache::detail
