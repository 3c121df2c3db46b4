#include "gpucache/dtype.hpp"

#include <algorithm>
#include <cmath>

#include "gpucache/common/dtype_formats.hpp"

namespace gpucache {
namespace {

using DL = DLPackCode;

// The one dtype table (columns: gpucache/common/dtype_formats.hpp's DTypeInfo): name, size,
// float, fraction bits, then the names in other formats: numpy's kind letter, safetensors, torch's
// dtype and legacy storage class, the DLPack code.
constexpr DTypeInfo kDTypes[] = {
    {DType::f64, "f64", 8, true, 52, 'f', "F64", "float64", "DoubleStorage", DL::float_},
    {DType::f32, "f32", 4, true, 23, 'f', "F32", "float32", "FloatStorage", DL::float_},
    {DType::f16, "f16", 2, true, 10, 'f', "F16", "float16", "HalfStorage", DL::float_},
    {DType::bf16, "bf16", 2, true, 7, 0, "BF16", "bfloat16", "BFloat16Storage", DL::bfloat},
    {DType::i64, "i64", 8, false, 0, 'i', "I64", "int64", "LongStorage", DL::int_},
    {DType::i32, "i32", 4, false, 0, 'i', "I32", "int32", "IntStorage", DL::int_},
    {DType::i16, "i16", 2, false, 0, 'i', "I16", "int16", "ShortStorage", DL::int_},
    {DType::i8, "i8", 1, false, 0, 'i', "I8", "int8", "CharStorage", DL::int_},
    {DType::u8, "u8", 1, false, 0, 'u', "U8", "uint8", "ByteStorage", DL::uint},
    {DType::boolean, "bool", 1, false, 0, 'b', "BOOL", "bool", "BoolStorage", DL::bool_},
    {DType::u16, "u16", 2, false, 0, 'u', "U16", "uint16", "", DL::uint},
    {DType::u32, "u32", 4, false, 0, 'u', "U32", "uint32", "", DL::uint},
    {DType::u64, "u64", 8, false, 0, 'u', "U64", "uint64", "", DL::uint},
    {DType::fp8_e4m3, "fp8_e4m3", 1, true, 3, 0, "F8_E4M3", "float8_e4m3fn", "", DL::none},
    {DType::fp8_e5m2, "fp8_e5m2", 1, true, 2, 0, "F8_E5M2", "float8_e5m2", "", DL::none},
};

const DTypeInfo* find(DType dtype) noexcept {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return &info;
  return nullptr;
}

template <typename Match>
std::optional<DType> find_if(Match match) noexcept {
  for (const auto& info : kDTypes)
    if (match(info)) return info.dtype;
  return std::nullopt;
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

std::span<const DTypeInfo> dtype_table() noexcept {
  return kDTypes;
}

double dtype_rounding_tolerance(DType dtype) noexcept {
  const DTypeInfo* info = find(dtype);
  if (info == nullptr || !info->is_float) return 1e-6;
  return std::max(1e-6, std::ldexp(1.0, 1 - info->mantissa_bits));
}

const DTypeInfo* dtype_info(DType dtype) noexcept {
  return find(dtype);
}

std::optional<DType> dtype_from_numpy(char kind, std::uint64_t itemsize) noexcept {
  return find_if([&](const DTypeInfo& info) {
    return kind != 0 && info.numpy_kind == kind && info.size == itemsize;
  });
}

std::optional<DType> dtype_from_safetensors(std::string_view name) noexcept {
  return find_if([&](const DTypeInfo& info) { return info.safetensors == name; });
}

std::optional<DType> dtype_from_torch(std::string_view name) noexcept {
  return find_if([&](const DTypeInfo& info) { return info.torch == name; });
}

std::optional<DType> dtype_from_torch_storage(std::string_view name) noexcept {
  return find_if(
      [&](const DTypeInfo& info) { return !name.empty() && info.torch_storage == name; });
}

std::optional<DType> dtype_from_dlpack(std::uint8_t code, std::uint8_t bits) noexcept {
  return find_if([&](const DTypeInfo& info) {
    return info.dlpack != DLPackCode::none && static_cast<std::uint8_t>(info.dlpack) == code &&
           info.size * 8 == bits;
  });
}

}  // namespace gpucache
