// What the Parquet test suites share: whether the reader is built, and the values pyarrow
// recorded beside each fixture (scripts/fixtures/*parquet*.py write <name>.expected.json).
#pragma once

#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "gpucache/input.hpp"

namespace parquet_test {

// False in a build without libsnappy: the Parquet reader is not compiled in, and its tests
// return at once.
inline bool parquet_built() {
  return gpucache::find_input_format("parquet")->built();
}

// The JSON file at `path` (a fixture's expected values), which must exist.
inline nlohmann::json expected_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path);
  return nlohmann::json::parse(in);
}

}  // namespace parquet_test
