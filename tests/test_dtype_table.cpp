// The dtype table (src/common/dtype.cpp, gpucache/common/dtype_formats.hpp): every row's names in
// the other formats lead back to it, its conversions and element readers hold, and no file outside
// src/common keeps a switch over dtypes.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/dtype.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

TEST_CASE("every dtype's names in other formats lead back to it") {
  std::set<std::string_view> names, safetensors, torch;
  for (const auto& info : dtype_table()) {
    CAPTURE(info.name);
    CHECK(names.insert(info.name).second);
    CHECK(safetensors.insert(info.safetensors).second);
    CHECK(torch.insert(info.torch).second);
    CHECK(dtype_info(info.dtype) == &info);
    CHECK(dtype_name(info.dtype) == info.name);
    CHECK(dtype_size(info.dtype) == info.size);
    CHECK(parse_dtype(info.name) == info.dtype);
    CHECK(dtype_from_safetensors(info.safetensors) == info.dtype);
    CHECK(dtype_from_torch(info.torch) == info.dtype);
    if (!info.torch_storage.empty())
      CHECK(dtype_from_torch_storage(info.torch_storage) == info.dtype);
    if (info.numpy_kind != 0) CHECK(dtype_from_numpy(info.numpy_kind, info.size) == info.dtype);
    if (info.dlpack != DLPackCode::none)
      CHECK(dtype_from_dlpack(static_cast<std::uint8_t>(info.dlpack),
                              static_cast<std::uint8_t>(info.size * 8)) == info.dtype);
    CHECK((info.mantissa_bits > 0) == info.is_float);
  }
  CHECK(names.size() == 15);
  CHECK(!dtype_from_numpy('f', 3));
  CHECK(!dtype_from_numpy(0, 2));
  CHECK(!dtype_from_safetensors("F128"));
  CHECK(!dtype_from_torch_storage(""));
  CHECK(dtype_rounding_tolerance(DType::f16) == doctest::Approx(1.0 / 512));
  CHECK(dtype_rounding_tolerance(DType::bf16) == doctest::Approx(1.0 / 64));
  CHECK(dtype_rounding_tolerance(DType::f32) == 1e-6);
  CHECK(dtype_rounding_tolerance(DType::i32) == 1e-6);
}

TEST_CASE("the conversions pack may store a column as") {
  // Exact where every source value is a target value, lossy where values are rounded.
  CHECK(dtype_conversion(DType::u8, DType::bf16)->exact);
  CHECK(dtype_conversion(DType::i8, DType::f16)->exact);
  CHECK(dtype_conversion(DType::u16, DType::f32)->exact);
  CHECK(dtype_conversion(DType::f16, DType::f32)->exact);
  CHECK(dtype_conversion(DType::f32, DType::f32)->exact);  // the same dtype: nothing to convert
  CHECK_FALSE(dtype_conversion(DType::f64, DType::f32)->exact);
  CHECK_FALSE(dtype_conversion(DType::f64, DType::bf16)->exact);
  CHECK_FALSE(dtype_conversion(DType::i32, DType::f32)->exact);
  CHECK_FALSE(dtype_conversion(DType::i16, DType::f16)->exact);
  // Not allowed: past f16's range, to f64 (rows are converted through f32), from bool, to ints.
  CHECK_FALSE(dtype_conversion(DType::u16, DType::f16));
  CHECK_FALSE(dtype_conversion(DType::i64, DType::f16));
  CHECK_FALSE(dtype_conversion(DType::f32, DType::f64));
  CHECK_FALSE(dtype_conversion(DType::boolean, DType::f32));
  CHECK_FALSE(dtype_conversion(DType::f32, DType::i32));
  CHECK(dtype_conversion_targets(DType::u8) == "f32, f16 or bf16");
  CHECK(dtype_conversion_targets(DType::u16) == "f32 or bf16");
  CHECK(dtype_conversion_targets(DType::boolean) == "none");

  // An exact conversion is exact for every value of the source: each integer of an 8-bit dtype
  // widens to f32 (the table's reader) and survives f16/bf16 rounding (the checks' f32 -> 16-bit
  // rule is the kernels'; here: its value is a multiple of the target's spacing). The lossy ones
  // hold a value that does not.
  for (const auto& info : dtype_table())
    for (const auto& conversion : info.converts_to) {
      CAPTURE(info.name);
      CAPTURE(dtype_name(conversion.to));
      REQUIRE(static_cast<bool>(info.to_f32));
      CHECK(dtype_info(conversion.to)->is_float);
      const int bits = dtype_info(conversion.to)->mantissa_bits + 1;  // significant bits
      if (!info.is_float) {
        // An integer dtype of n value bits is exact in a float of at least n significant bits.
        const int value_bits = static_cast<int>(info.size * 8) - (info.numpy_kind == 'i' ? 1 : 0);
        CHECK(conversion.exact == (value_bits <= bits));
      } else {
        CHECK(conversion.exact == (info.mantissa_bits < dtype_info(conversion.to)->mantissa_bits &&
                                   info.size < dtype_info(conversion.to)->size));
      }
    }
  for (const auto& info : dtype_table())
    if (static_cast<bool>(info.from_i64)) {
      CAPTURE(info.name);
      CHECK(!info.is_float);
      std::byte element[8] = {};
      CHECK(info.from_i64(100, element));
      float widened = 0;
      info.to_f32(element, &widened, 1);
      CHECK(widened == 100.0f);
      CHECK(info.from_i64(-1, element) == (info.numpy_kind == 'i'));
    }
  CHECK_FALSE(dtype_info(DType::i8)->from_i64(128, nullptr));
  CHECK_FALSE(dtype_info(DType::u16)->from_i64(65536, nullptr));
}

TEST_CASE("no switch over dtypes outside the dtype table's module") {
  const fs::path src = fs::path(GPUCACHE_TEST_DATA) / ".." / ".." / "src";
  REQUIRE(fs::is_directory(src));
  const std::regex switching(R"(case\s+(gpucache::)?DType::)");
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    const auto extension = entry.path().extension().string();
    if (!entry.is_regular_file() ||
        (extension != ".cpp" && extension != ".hpp" && extension != ".cu" && extension != ".cuh"))
      continue;
    const std::string relative = fs::relative(entry.path(), src).generic_string();
    if (relative.starts_with("common/")) continue;
    std::ifstream stream(entry.path());
    std::string line;
    for (int number = 1; std::getline(stream, line); ++number)
      if (std::regex_search(line, switching)) {
        FAIL_CHECK("src/" << relative << ":" << number << " switches over dtypes: look the dtype "
                          << "up in gpucache/common/dtype_formats.hpp instead (a column of the "
                          << "table, or a table of the module's own, as compute_backend.cpp's)");
      }
  }
}
