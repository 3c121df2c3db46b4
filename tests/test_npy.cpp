#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpucache/error.hpp"
#include "gpucache/npy.hpp"
#include "test_support.hpp"

using namespace gpucache;
using test_support::data_path;

namespace {

nlohmann::json expected() {
  std::ifstream stream(data_path("npy/expected.json"));
  return nlohmann::json::parse(stream);
}

std::vector<double> values_as_f64(const Tensor& tensor) {
  std::vector<std::byte> raw(tensor.nbytes());
  tensor.copy_row_major(0, raw);
  std::vector<double> values;
  for (std::uint64_t i = 0; i < tensor.numel(); ++i) {
    const std::byte* at = raw.data() + i * dtype_size(tensor.dtype);
    switch (tensor.dtype) {
      case DType::f32:
        values.push_back(*reinterpret_cast<const float*>(at));
        break;
      case DType::f64:
        values.push_back(*reinterpret_cast<const double*>(at));
        break;
      case DType::i64:
        values.push_back(static_cast<double>(*reinterpret_cast<const std::int64_t*>(at)));
        break;
      case DType::boolean:
        values.push_back(*reinterpret_cast<const std::uint8_t*>(at));
        break;
      default:
        FAIL("unexpected dtype in test");
    }
  }
  return values;
}

}  // namespace

TEST_CASE("every numeric fixture reads back the values numpy wrote") {
  const auto want = expected();
  for (const char* name :
       {"f32_c.npy", "f64_big_fortran.npy", "i64.npy", "bool.npy", "empty.npy"}) {
    CAPTURE(name);
    const auto value = read_npy(data_path(std::string("npy/") + name));
    const Tensor& tensor = *value.as_tensor();
    CHECK(tensor.shape == want[name]["shape"].get<std::vector<std::int64_t>>());
    CHECK(values_as_f64(tensor) == want[name]["values_f64"].get<std::vector<double>>());
  }
}

TEST_CASE("Fortran order becomes strides and big-endian is flagged") {
  const auto value = read_npy(data_path("npy/f64_big_fortran.npy"));
  const Tensor& tensor = *value.as_tensor();
  CHECK(tensor.big_endian);
  CHECK(tensor.strides == std::vector<std::int64_t>{1, 7});
  CHECK_FALSE(tensor.is_contiguous_le());
}

TEST_CASE("f16 is read as f16") {
  const auto value = read_npy(data_path("npy/f16.npy"));
  CHECK(value.as_tensor()->dtype == DType::f16);
  CHECK(value.as_tensor()->shape == std::vector<std::int64_t>{7, 5});
}

TEST_CASE("bad .npy files are refused with the file and the cause") {
  auto message = [](const std::string& name) {
    try {
      read_npy(data_path("npy/" + name));
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  CHECK(message("object.npy").find("object arrays") != std::string::npos);
  CHECK(message("truncated.npy").find("follow the header") != std::string::npos);
  CHECK(message("bad_magic.npy").find("bad magic") != std::string::npos);
  CHECK(message("missing.npy").find("cannot open") != std::string::npos);
  CHECK(message("truncated.npy").find("npy/truncated.npy") != std::string::npos);
}

TEST_CASE("write_npy output is read back identically, including 1-D shapes") {
  test_support::ScratchDir scratch;
  const std::vector<float> values{1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.0f};
  auto fill = [&](std::span<std::byte> out, std::uint64_t first, std::uint64_t rows) {
    std::memcpy(out.data(), values.data() + first * 2, rows * 2 * sizeof(float));
  };
  write_npy(scratch / "m.npy", DType::f32, {3, 2}, fill);
  const auto value = read_npy(scratch / "m.npy");
  CHECK(value.as_tensor()->shape == std::vector<std::int64_t>{3, 2});
  CHECK(std::memcmp(value.as_tensor()->contiguous_bytes().data(), values.data(), 24) == 0);
  write_npy(scratch / "v.npy", DType::u16, {4},
            [](std::span<std::byte> out, std::uint64_t, std::uint64_t) {
              std::memset(out.data(), 0, out.size());
            });
  CHECK(read_npy(scratch / "v.npy").as_tensor()->shape == std::vector<std::int64_t>{4});
  // Header padded so data starts on a 64-byte boundary, as numpy writes it.
  CHECK((test_support::read_bytes(scratch / "m.npy").size() - 24) % 64 == 0);
}
