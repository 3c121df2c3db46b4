// Compares a gpucache::Value with the NAME.expected.json that scripts/fixtures/pt_fixtures.py
// wrote from what torch or numpy itself loaded. Tensors are compared bit for bit (row-major
// little-endian bytes) and element by element, with their shape, strides and storage offset.
#pragma once

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpucache/value.hpp"

namespace expected_tree {

inline nlohmann::json load_expected(const std::filesystem::path& fixture) {
  auto path = fixture;
  path.replace_extension(".expected.json");
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "missing " << path.string());
  return nlohmann::json::parse(in);
}

inline std::string to_hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (auto byte : bytes) {
    const auto value = std::to_integer<unsigned>(byte);
    out += kDigits[value >> 4];
    out += kDigits[value & 15];
  }
  return out;
}

inline double half_to_double(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  double value;
  if (exponent == 0)
    value = std::ldexp(mantissa, -24);
  else if (exponent == 31)
    value = mantissa ? NAN : INFINITY;
  else
    value = std::ldexp(mantissa + 1024, exponent - 25);
  return (bits & 0x8000) ? -value : value;
}

// Element i of row-major little-endian bytes, compared with its JSON value.
inline void check_element(gpucache::DType dtype, const std::byte* element,
                          const nlohmann::json& want) {
  using gpucache::DType;
  auto load = [&](auto zero) {
    decltype(zero) value;
    std::memcpy(&value, element, sizeof(value));
    return value;
  };
  switch (dtype) {
    case DType::f64:
      CHECK(load(0.0) == want.get<double>());
      break;
    case DType::f32:
      CHECK(static_cast<double>(load(0.0f)) == want.get<double>());
      break;
    case DType::f16:
      CHECK(half_to_double(load(std::uint16_t{})) == want.get<double>());
      break;
    case DType::bf16: {
      const std::uint32_t bits = std::uint32_t{load(std::uint16_t{})} << 16;
      CHECK(static_cast<double>(std::bit_cast<float>(bits)) == want.get<double>());
      break;
    }
    case DType::i64:
      CHECK(load(std::int64_t{}) == want.get<std::int64_t>());
      break;
    case DType::i32:
      CHECK(load(std::int32_t{}) == want.get<std::int64_t>());
      break;
    case DType::i16:
      CHECK(load(std::int16_t{}) == want.get<std::int64_t>());
      break;
    case DType::i8:
      CHECK(load(std::int8_t{}) == want.get<std::int64_t>());
      break;
    case DType::u8:
      CHECK(load(std::uint8_t{}) == want.get<std::uint64_t>());
      break;
    case DType::u16:
      CHECK(load(std::uint16_t{}) == want.get<std::uint64_t>());
      break;
    case DType::u32:
      CHECK(load(std::uint32_t{}) == want.get<std::uint64_t>());
      break;
    case DType::u64:
      CHECK(load(std::uint64_t{}) == want.get<std::uint64_t>());
      break;
    case DType::boolean:
      CHECK((load(std::uint8_t{}) != 0) == want.get<bool>());
      break;
    default:
      FAIL("unexpected dtype in fixture");
  }
}

inline void check_tensor(const gpucache::Tensor& tensor, const nlohmann::json& want) {
  CHECK(gpucache::dtype_name(tensor.dtype) == want["dtype"].get<std::string>());
  CHECK(tensor.shape == want["shape"].get<std::vector<std::int64_t>>());
  CHECK(tensor.strides == want["stride"].get<std::vector<std::int64_t>>());
  CHECK(tensor.storage_offset == want["storage_offset"].get<std::int64_t>());
  tensor.check_bounds("fixture");
  std::vector<std::byte> dense(tensor.nbytes());
  tensor.copy_row_major(0, dense);
  CHECK(to_hex(dense) == want["hex"].get<std::string>());
  const auto& values = want["values"];
  REQUIRE(values.size() == tensor.numel());
  const std::size_t itemsize = gpucache::dtype_size(tensor.dtype);
  for (std::size_t i = 0; i < values.size(); ++i) {
    INFO("element " << i);
    check_element(tensor.dtype, dense.data() + i * itemsize, values[i]);
  }
}

inline void check_value(const gpucache::Value& value, const nlohmann::json& want,
                        const std::string& where = "root") {
  INFO("at " << where);
  const auto type = want["type"].get<std::string>();
  REQUIRE(value.type_name() == type);
  if (type == "dict") {
    const auto& items = value.as_dict()->items;
    REQUIRE(items.size() == want["items"].size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto key = want["items"][i][0].get<std::string>();
      CHECK(items[i].first == key);
      check_value(items[i].second, want["items"][i][1], where + "/" + key);
    }
  } else if (type == "list" || type == "tuple") {
    const auto& items = value.as_list()->items;
    REQUIRE(items.size() == want["items"].size());
    for (std::size_t i = 0; i < items.size(); ++i)
      check_value(items[i], want["items"][i], where + "[" + std::to_string(i) + "]");
  } else if (type == "str") {
    CHECK(*value.as_string() == want["value"].get<std::string>());
  } else if (type == "int") {
    CHECK(*value.as_int() == want["value"].get<std::int64_t>());
  } else if (type == "float") {
    CHECK(*value.as_float() == want["value"].get<double>());
  } else if (type == "bool") {
    CHECK(std::get<bool>(value.data) == want["value"].get<bool>());
  } else if (type == "tensor") {
    check_tensor(*value.as_tensor(), want);
  } else {
    CHECK(type == "None");
  }
}

// Every fixture with this extension in folder, sorted, so a missing folder cannot pass silently.
inline std::vector<std::filesystem::path> fixtures(const std::filesystem::path& folder,
                                                   const std::string& extension) {
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.path().extension() == extension) found.push_back(entry.path());
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace expected_tree
