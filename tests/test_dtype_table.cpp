// The dtype table (src/common/dtype.cpp, gpucache/common/dtype_formats.hpp): every row's names in
// the other formats lead back to it, and no file outside src/common keeps a switch over dtypes.
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

// Files that still switch over dtypes, each with why. Keep this list short: new code looks the
// dtype table up instead.
const std::set<std::string> kStillSwitching = {
    // The float storage rule and the kernels' input/output type enums: issue 27 reworks these.
    "validate/validate.cpp",
    "validate/row_converter.cpp",
    // Parquet's physical-type decoding (issue 28 works on src/inputs/parquet).
    "inputs/parquet/parquet_chunk.cpp",
};

TEST_CASE("no switch over dtypes outside the dtype table's module") {
  const fs::path src = fs::path(GPUCACHE_TEST_DATA) / ".." / ".." / "src";
  REQUIRE(fs::is_directory(src));
  const std::regex switching(R"(case\s+(gpucache::)?DType::)");
  std::set<std::string> found;
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
        found.insert(relative);
        if (!kStillSwitching.contains(relative))
          FAIL_CHECK("src/" << relative << ":" << number << " switches over dtypes: look the dtype "
                            << "up in gpucache/common/dtype_formats.hpp instead");
      }
  }
  // A file in the list that no longer switches should come off it (said, not failed: other
  // branches rework those files).
  for (const auto& file : kStillSwitching)
    if (!found.contains(file)) MESSAGE("src/" << file << " no longer switches over dtypes");
}
