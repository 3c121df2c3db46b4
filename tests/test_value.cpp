#include <doctest/doctest.h>

#include <cstring>

#include "gpucache/error.hpp"
#include "gpucache/value.hpp"

using namespace gpucache;

namespace {
Tensor make_f32(std::vector<std::int64_t> shape, std::vector<float> values) {
  std::vector<std::byte> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return Tensor::from_buffer(DType::f32, std::move(shape), std::move(bytes));
}
std::vector<float> read_all(const Tensor& tensor) {
  std::vector<float> out(tensor.numel());
  tensor.copy_row_major(0, std::as_writable_bytes(std::span(out)));
  return out;
}
}  // namespace

TEST_CASE("a transposed view is copied in row-major order") {
  Tensor tensor = make_f32({2, 3}, {0, 1, 2, 3, 4, 5});
  tensor.shape = {3, 2};
  tensor.strides = {1, 3};
  CHECK_FALSE(tensor.is_contiguous_le());
  tensor.check_bounds("t");
  CHECK(read_all(tensor) == std::vector<float>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("copy from the middle of a strided tensor starts at the right element") {
  Tensor tensor = make_f32({2, 3}, {0, 1, 2, 3, 4, 5});
  tensor.shape = {3, 2};
  tensor.strides = {1, 3};
  std::vector<float> out(3);
  tensor.copy_row_major(3, std::as_writable_bytes(std::span(out)));
  CHECK(out == std::vector<float>{4, 2, 5});
}

TEST_CASE("big-endian storage is swapped") {
  std::vector<std::byte> bytes{std::byte{0x3f}, std::byte{0x80}, std::byte{0}, std::byte{0}};
  Tensor tensor = Tensor::from_buffer(DType::f32, {1}, bytes);
  tensor.big_endian = true;
  CHECK(read_all(tensor) == std::vector<float>{1.0f});
}

TEST_CASE("strides reaching past the storage are refused") {
  Tensor tensor = make_f32({2, 2}, {1, 2, 3, 4});
  tensor.storage_offset = 1;
  CHECK_THROWS_AS(tensor.check_bounds("t"), Error);
  tensor.storage_offset = 0;
  tensor.strides = {1, INT64_MAX / 2};
  CHECK_THROWS_AS(tensor.check_bounds("t"), Error);
}

TEST_CASE("dict lookup and type names") {
  auto dict = std::make_shared<Dict>();
  dict->items.emplace_back("a", Value(std::int64_t{3}));
  Value value(dict);
  CHECK(value.type_name() == "dict");
  REQUIRE(value.as_dict()->find("a") != nullptr);
  CHECK(*value.as_dict()->find("a")->as_int() == 3);
  CHECK(value.as_dict()->find("b") == nullptr);
}
