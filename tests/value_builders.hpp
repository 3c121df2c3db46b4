// Small helpers for building Value trees in tests, as readers would produce them.
#pragma once

#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpucache/value.hpp"

namespace gpucache::test {

inline Value tensor(DType dtype, std::vector<std::int64_t> shape, std::vector<std::byte> bytes) {
  return Value(
      std::make_shared<Tensor>(Tensor::from_buffer(dtype, std::move(shape), std::move(bytes))));
}

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

inline Value f32(std::vector<std::int64_t> shape, const std::vector<float>& values) {
  return tensor(DType::f32, std::move(shape), bytes_of(values));
}

// Values start, start + 1, ...: row r of an [N, D] matrix holds r * D + start ... .
inline Value f32_iota(std::vector<std::int64_t> shape, float start = 0) {
  std::int64_t count = 1;
  for (auto extent : shape) count *= extent;
  std::vector<float> values(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = start + static_cast<float>(i);
  return f32(std::move(shape), values);
}

inline Value dict(std::vector<std::pair<std::string, Value>> items) {
  auto result = std::make_shared<Dict>();
  result->items = std::move(items);
  return Value(std::move(result));
}

inline Value list(std::vector<Value> items) {
  auto result = std::make_shared<List>();
  result->items = std::move(items);
  return Value(std::move(result));
}

inline Value str(std::string text) {
  return Value(std::move(text));
}

}  // namespace gpucache::test
