// Element types that gpucache stores. The numeric codes are part of the shard format
// (src/shard/SPEC.md, "dtype codes") and never change meaning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "gpucache/api.hpp"

namespace gpucache {

enum class DType : std::uint8_t {
  f32 = 1,
  f16 = 2,
  bf16 = 3,
  f64 = 4,
  i64 = 5,
  i32 = 6,
  i16 = 7,
  i8 = 8,
  u8 = 9,
  boolean = 10,
  fp8_e4m3 = 11,  // reserved: readers accept the code, pack does not produce it yet
  fp8_e5m2 = 12,  // reserved, as above
  u16 = 13,
  u32 = 14,
  u64 = 15,
};

// Size of one element in bytes; 0 for an unknown code.
GPUCACHE_API std::size_t dtype_size(DType dtype) noexcept;
// Spelling used on the command line, in manifest.json and in --json output ("f32", "bool", ...).
GPUCACHE_API std::string_view dtype_name(DType dtype) noexcept;
GPUCACHE_API std::optional<DType> parse_dtype(std::string_view name) noexcept;
// True for codes this version knows; the shard reader rejects any other code.
GPUCACHE_API bool dtype_is_known(std::uint8_t code) noexcept;
GPUCACHE_API bool dtype_is_float(DType dtype) noexcept;

}  // namespace gpucache
