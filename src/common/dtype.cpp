#include "gpucache/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/common/float_convert.hpp"

namespace gpucache {
namespace {

using DL = DLPackCode;

// Element readers and writers of the table's to_f32 and from_i64 columns.
template <class T>
void numbers_to_f32(const std::byte* in, float* out, std::size_t count) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(out, in, count * sizeof(float));
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      T value;
      std::memcpy(&value, in + i * sizeof(T), sizeof(T));
      out[i] = static_cast<float>(value);
    }
  }
}

template <float (*Widen)(std::uint16_t) noexcept>
void halves_to_f32(const std::byte* in, float* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, in + 2 * i, 2);
    out[i] = Widen(bits);
  }
}
constexpr auto f16_to_f32 = &halves_to_f32<&detail::f16_bits_to_f32>;
constexpr auto bf16_to_f32 = &halves_to_f32<&detail::bf16_bits_to_f32>;

template <class T>
bool integer_from_i64(std::int64_t value, std::byte* out) {
  if (!std::in_range<T>(value)) return false;
  const T narrowed = static_cast<T>(value);
  std::memcpy(out, &narrowed, sizeof(T));
  return true;
}

// The conversions of each row (DTypeConversion): what --dtype may store a column of it as.
constexpr DTypeConversion kFromF64[] = {
    {DType::f32, false}, {DType::f16, false}, {DType::bf16, false}};
constexpr DTypeConversion kFromF32[] = {{DType::f16, false}, {DType::bf16, false}};
constexpr DTypeConversion kFromF16[] = {{DType::f32, true}, {DType::bf16, false}};
constexpr DTypeConversion kFromBF16[] = {{DType::f32, true}, {DType::f16, false}};
// Integers of at most 8 bits: exact in f16 (11 significant bits) and bf16 (8).
constexpr DTypeConversion kFromByte[] = {
    {DType::f32, true}, {DType::f16, true}, {DType::bf16, true}};
constexpr DTypeConversion kFromI16[] = {
    {DType::f32, true}, {DType::f16, false}, {DType::bf16, false}};
// u16 reaches 65535, past f16's largest finite value (65504): no f16.
constexpr DTypeConversion kFromU16[] = {{DType::f32, true}, {DType::bf16, false}};
constexpr DTypeConversion kFromWide[] = {{DType::f32, false}, {DType::bf16, false}};

// The one dtype table (columns: gpucache/common/dtype_formats.hpp's DTypeInfo): name, size,
// float, fraction bits, then the names in other formats: numpy's kind letter, safetensors, torch's
// dtype and legacy storage class, the DLPack code; then the element reader (to f32), the integer
// writer (from i64) and the conversions pack may store it as.
constexpr DTypeInfo kDTypes[] = {
    {DType::f64, "f64", 8, true, 52, 'f', "F64", "float64", "DoubleStorage", DL::float_,
     &numbers_to_f32<double>, nullptr, kFromF64},
    {DType::f32, "f32", 4, true, 23, 'f', "F32", "float32", "FloatStorage", DL::float_,
     &numbers_to_f32<float>, nullptr, kFromF32},
    {DType::f16, "f16", 2, true, 10, 'f', "F16", "float16", "HalfStorage", DL::float_, f16_to_f32,
     nullptr, kFromF16},
    {DType::bf16, "bf16", 2, true, 7, 0, "BF16", "bfloat16", "BFloat16Storage", DL::bfloat,
     bf16_to_f32, nullptr, kFromBF16},
    {DType::i64, "i64", 8, false, 0, 'i', "I64", "int64", "LongStorage", DL::int_,
     &numbers_to_f32<std::int64_t>, &integer_from_i64<std::int64_t>, kFromWide},
    {DType::i32, "i32", 4, false, 0, 'i', "I32", "int32", "IntStorage", DL::int_,
     &numbers_to_f32<std::int32_t>, &integer_from_i64<std::int32_t>, kFromWide},
    {DType::i16, "i16", 2, false, 0, 'i', "I16", "int16", "ShortStorage", DL::int_,
     &numbers_to_f32<std::int16_t>, &integer_from_i64<std::int16_t>, kFromI16},
    {DType::i8, "i8", 1, false, 0, 'i', "I8", "int8", "CharStorage", DL::int_,
     &numbers_to_f32<std::int8_t>, &integer_from_i64<std::int8_t>, kFromByte},
    {DType::u8, "u8", 1, false, 0, 'u', "U8", "uint8", "ByteStorage", DL::uint,
     &numbers_to_f32<std::uint8_t>, &integer_from_i64<std::uint8_t>, kFromByte},
    {DType::boolean,
     "bool",
     1,
     false,
     0,
     'b',
     "BOOL",
     "bool",
     "BoolStorage",
     DL::bool_,
     nullptr,
     nullptr,
     {}},
    {DType::u16, "u16", 2, false, 0, 'u', "U16", "uint16", "", DL::uint,
     &numbers_to_f32<std::uint16_t>, &integer_from_i64<std::uint16_t>, kFromU16},
    {DType::u32, "u32", 4, false, 0, 'u', "U32", "uint32", "", DL::uint,
     &numbers_to_f32<std::uint32_t>, &integer_from_i64<std::uint32_t>, kFromWide},
    {DType::u64, "u64", 8, false, 0, 'u', "U64", "uint64", "", DL::uint,
     &numbers_to_f32<std::uint64_t>, &integer_from_i64<std::uint64_t>, kFromWide},
    {DType::fp8_e4m3,
     "fp8_e4m3",
     1,
     true,
     3,
     0,
     "F8_E4M3",
     "float8_e4m3fn",
     "",
     DL::none,
     nullptr,
     nullptr,
     {}},
    {DType::fp8_e5m2,
     "fp8_e5m2",
     1,
     true,
     2,
     0,
     "F8_E5M2",
     "float8_e5m2",
     "",
     DL::none,
     nullptr,
     nullptr,
     {}},
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

std::optional<DTypeConversion> dtype_conversion(DType from, DType to) noexcept {
  if (from == to) return DTypeConversion{to, true};
  const DTypeInfo* info = find(from);
  if (info == nullptr) return std::nullopt;
  for (const auto& conversion : info->converts_to)
    if (conversion.to == to) return conversion;
  return std::nullopt;
}

std::string dtype_conversion_targets(DType from) {
  const DTypeInfo* info = find(from);
  if (info == nullptr || info->converts_to.empty()) return "none";
  std::string text;
  const std::size_t count = info->converts_to.size();
  for (std::size_t i = 0; i < count; ++i)
    text += std::string(i == 0           ? ""
                        : i + 1 == count ? " or "
                                         : ", ") +
            std::string(dtype_name(info->converts_to[i].to));
  return text;
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
