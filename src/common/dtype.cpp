#include "gpucache/dtype.hpp"

#include <array>

namespace gpucache {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
  bool is_float;
};

constexpr std::array<DTypeInfo, 15> kDTypes{{
    {DType::f32, "f32", 4, true},
    {DType::f16, "f16", 2, true},
    {DType::bf16, "bf16", 2, true},
    {DType::f64, "f64", 8, true},
    {DType::i64, "i64", 8, false},
    {DType::i32, "i32", 4, false},
    {DType::i16, "i16", 2, false},
    {DType::i8, "i8", 1, false},
    {DType::u8, "u8", 1, false},
    {DType::boolean, "bool", 1, false},
    {DType::fp8_e4m3, "fp8_e4m3", 1, true},
    {DType::fp8_e5m2, "fp8_e5m2", 1, true},
    {DType::u16, "u16", 2, false},
    {DType::u32, "u32", 4, false},
    {DType::u64, "u64", 8, false},
}};

const DTypeInfo* find(DType dtype) noexcept {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return &info;
  return nullptr;
}

}  // namespace

std::size_t dtype_size(DType dtype) noexcept {
  const auto* info = find(dtype);
  return info ? info->size : 0;
}

std::string_view dtype_name(DType dtype) noexcept {
  const auto* info = find(dtype);
  return info ? info->name : std::string_view("unknown");
}

std::optional<DType> parse_dtype(std::string_view name) noexcept {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  if (name == "float32") return DType::f32;
  if (name == "float16" || name == "half") return DType::f16;
  if (name == "bfloat16") return DType::bf16;
  if (name == "float64") return DType::f64;
  return std::nullopt;
}

bool dtype_is_known(std::uint8_t code) noexcept {
  return find(static_cast<DType>(code)) != nullptr;
}

bool dtype_is_float(DType dtype) noexcept {
  const auto* info = find(dtype);
  return info && info->is_float;
}

}  // namespace gpucache
