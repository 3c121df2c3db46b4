// Helpers for the pack suites: writing a .npy from values, reading a dataset's manifest.json.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "gpucache/dtype.hpp"
#include "gpucache/npy.hpp"

namespace test_support {

// Writes `values` (row-major, shape[0] rows) as a .npy of `dtype` with `shape`.
template <typename T>
void save_npy(const std::string& path, gpucache::DType dtype,
              const std::vector<std::uint64_t>& shape, const std::vector<T>& values) {
  std::uint64_t per_row = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) per_row *= shape[d];
  gpucache::write_npy(path, dtype, shape,
                      [&](std::span<std::byte> out, std::uint64_t first, std::uint64_t) {
                        std::memcpy(out.data(), values.data() + first * per_row, out.size());
                      });
}

// The dataset directory's manifest.json, parsed.
inline nlohmann::json manifest_json(const std::string& dataset) {
  std::ifstream stream(dataset + "/manifest.json");
  return nlohmann::json::parse(stream);
}

}  // namespace test_support
