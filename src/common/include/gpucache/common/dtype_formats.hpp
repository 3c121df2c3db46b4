// The dtype table's names in other formats: numpy, DLPack, safetensors and torch. Every reader,
// exporter and binding that meets another format's element type looks it up here (src/common/
// dtype.cpp holds the one table; adding a dtype or a mapping is one row there), so no other file
// keeps a switch over dtypes (tests/test_dtype_table.cpp checks that none appears).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
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

// A dtype pack may store a column of another dtype as, when asked (--dtype COLUMN=TYPE): exact
// when every value of the source dtype is a value of the target (u8 -> bf16), lossy when values
// are rounded (f64 -> f32). Rows are converted through f32 (RowConverter), so the targets are the
// conversion dtypes f32, f16 and bf16; an integer dtype lists f16 only when its range fits f16's
// (so no integer overflows on conversion).
struct DTypeConversion {
  DType to;
  bool exact;
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
  // Widens `count` elements to f32 (rounding to nearest where f32 cannot hold a value: f64,
  // 32- and 64-bit integers); nullptr for a dtype not read as numbers (bool, fp8).
  void (*to_f32)(const std::byte* in, float* out, std::size_t count);
  // Stores an integer as one element of this dtype; false when it is out of the dtype's range.
  // nullptr for non-integer dtypes. (Parquet's INT32 narrowed to its INT(8|16) annotation.)
  bool (*from_i64)(std::int64_t value, std::byte* out);
  std::span<const DTypeConversion> converts_to;  // see DTypeConversion; same dtype not listed
};

// The relative error a value may carry from rounding to `dtype`, with a margin (4 units of
// rounding), and never below 1e-6: what verify --deep allows when it re-checks stored rows.
double dtype_rounding_tolerance(DType dtype) noexcept;

// Every dtype, one row each (the order safetensors' error message lists them in).
std::span<const DTypeInfo> dtype_table() noexcept;
// The row of a dtype; nullptr for a code outside the table.
const DTypeInfo* dtype_info(DType dtype) noexcept;

// Whether pack may store `from` values as `to` (--dtype), and whether exactly: the same dtype is
// exact; otherwise the row's converts_to entry, or nullopt when it does not list `to`.
std::optional<DTypeConversion> dtype_conversion(DType from, DType to) noexcept;
// The dtypes `from` may be stored as, for messages: "f32, f16 or bf16"; "none" when none.
std::string dtype_conversion_targets(DType from);

std::optional<DType> dtype_from_numpy(char kind, std::uint64_t itemsize) noexcept;
std::optional<DType> dtype_from_safetensors(std::string_view name) noexcept;
std::optional<DType> dtype_from_torch(std::string_view name) noexcept;
std::optional<DType> dtype_from_torch_storage(std::string_view name) noexcept;
std::optional<DType> dtype_from_dlpack(std::uint8_t code, std::uint8_t bits) noexcept;

}  // namespace gpucache
