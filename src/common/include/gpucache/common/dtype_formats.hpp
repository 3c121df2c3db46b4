// The dtype table's names in other formats: numpy, DLPack, safetensors and torch. Every reader,
// exporter and binding that meets another format's element type looks it up here (src/common/
// dtype.cpp holds the one table; adding a dtype or a mapping is one row there), so no other file
// keeps a switch over dtypes (tests/test_dtype_table.cpp checks that none appears).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "gpucache/dtype.hpp"

namespace gpucache {

// DLPack's type codes (dlpack.h, DLDataTypeCode).
enum class DLPackCode : std::uint8_t {
  int_ = 0,
  uint = 1,
  float_ = 2,
  bfloat = 4,
  bool_ = 6,
  none = 255,  // DLPack has no code for this dtype
};

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // gpucache's spelling (CLI, manifest.json, --json): "f32", "bool"
  std::size_t size;       // bytes per element
  bool is_float;
  int mantissa_bits;             // a float's stored fraction bits (f32: 23); 0 for integers
  char numpy_kind;               // numpy's kind letter: 'f', 'i', 'u', 'b'; 0 where numpy has none
  std::string_view safetensors;  // the safetensors dtype, "F32"
  std::string_view torch;        // torch's dtype, torch.<name>: "float32"
  std::string_view torch_storage;  // torch's legacy typed storage class, "FloatStorage"; "" if none
  DLPackCode dlpack;               // with size * 8 bits
};

// The relative error a value may carry from rounding to `dtype`, with a margin (4 units of
// rounding), and never below 1e-6: what verify --deep allows when it re-checks stored rows.
double dtype_rounding_tolerance(DType dtype) noexcept;

// Every dtype, one row each (the order safetensors' error message lists them in).
std::span<const DTypeInfo> dtype_table() noexcept;
// The row of a dtype; nullptr for a code outside the table.
const DTypeInfo* dtype_info(DType dtype) noexcept;

std::optional<DType> dtype_from_numpy(char kind, std::uint64_t itemsize) noexcept;
std::optional<DType> dtype_from_safetensors(std::string_view name) noexcept;
std::optional<DType> dtype_from_torch(std::string_view name) noexcept;
std::optional<DType> dtype_from_torch_storage(std::string_view name) noexcept;
std::optional<DType> dtype_from_dlpack(std::uint8_t code, std::uint8_t bits) noexcept;

}  // namespace gpucache
