// Columns in memory with a device view (MemoryColumn::device_values), for the pack suites that
// compare a pack reading it with one reading only the host values: tests/test_pack_device_view.cpp
// (CPU validation ignores it) and tests/test_gpu_pack_device_view.cpp (CUDA reads it).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gpucache/checks.hpp"
#include "gpucache/memory_input.hpp"
#include "gpucache/pack.hpp"
#include "test_support.hpp"

namespace test_support {

// A dialogue pair: question (f32) and answer (bf16) embeddings, with rows that every check
// drops (NaN, zero, a norm out of bounds, a duplicate, a cosine out of bounds, an f16 overflow).
struct DevicePairTable {
  static constexpr std::uint64_t kDim = 96;
  std::uint64_t rows;
  std::vector<float> question;
  std::vector<std::uint16_t> answer;  // bf16 bits

  explicit DevicePairTable(std::uint64_t rows_) : rows(rows_) {
    std::mt19937 random(5);
    std::normal_distribution<float> normal;
    question.resize(rows * kDim);
    std::vector<float> answer_f32(rows * kDim);
    for (std::uint64_t r = 0; r < rows; ++r)
      for (std::uint64_t d = 0; d < kDim; ++d) {
        const float x = normal(random);
        question[r * kDim + d] = x;
        answer_f32[r * kDim + d] = 0.8f * x + 0.6f * normal(random);  // cosine about 0.8
      }
    for (std::uint64_t r = 0; r < rows; ++r) {
      float* q = question.data() + r * kDim;
      float* a = answer_f32.data() + r * kDim;
      if (r % 97 == 5) q[7] = NAN;
      if (r % 89 == 6) std::memset(a, 0, kDim * 4);
      if (r % 83 == 7) q[0] = 70000.0f;  // overflows f16, and its norm is above 100
      if (r % 79 == 8)
        for (std::uint64_t d = 0; d < kDim; ++d) a[d] = -q[d];  // cosine -1
      if (r % 73 == 9 && r > 0) std::memcpy(q, q - kDim, kDim * 4);
    }
    answer.resize(rows * kDim);
    for (std::uint64_t i = 0; i < answer.size(); ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, &answer_f32[i], 4);
      answer[i] = static_cast<std::uint16_t>(bits >> 16);
    }
  }

  std::uint64_t question_bytes() const { return question.size() * 4; }
  std::uint64_t answer_bytes() const { return answer.size() * 2; }

  // The columns over the host values; with device views when both pointers are given.
  std::vector<gpucache::MemoryColumn> columns(const void* question_device = nullptr,
                                              const void* answer_device = nullptr,
                                              int device_ordinal = 0) const {
    gpucache::MemoryColumn q{"question",
                             gpucache::ColumnKind::tensor,
                             gpucache::DType::f32,
                             rows,
                             {kDim},
                             std::as_bytes(std::span(question)),
                             {}};
    gpucache::MemoryColumn a{"answer",
                             gpucache::ColumnKind::tensor,
                             gpucache::DType::bf16,
                             rows,
                             {kDim},
                             std::as_bytes(std::span(answer)),
                             {}};
    if (question_device && answer_device) {
      q.device_values = question_device;
      a.device_values = answer_device;
      q.device_ordinal = a.device_ordinal = device_ordinal;
    }
    return {q, a};
  }

  // Every check on both columns, both stored as f16 (overflow drops), shuffled, in several shards.
  static gpucache::PackOptions options(std::vector<gpucache::MemoryColumn> columns,
                                       const std::string& output, gpucache::Device device) {
    gpucache::PackOptions options;
    options.memory_columns = std::move(columns);
    options.output_dir = output;
    options.dtype = gpucache::DType::f16;
    options.shard_rows = 1500;
    options.checks = {gpucache::parse_checks_spec("question=finite,nonzero,norm,dedup,pair_cos"),
                      gpucache::parse_checks_spec("answer=finite,nonzero,norm,pair_cos")};
    options.validation.pair_cos_min = 0.0;
    options.validation.on_overflow = gpucache::OverflowPolicy::drop;
    options.validation.shuffle = true;
    options.validation.seed = 11;
    options.validation.device = device;
    options.force = true;
    return options;
  }
};

// Every file of dataset `a` has the same bytes in dataset `b`, and b has no other files.
inline void check_same_dataset(const std::string& a, const std::string& b) {
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(a)) {
    const auto name = entry.path().filename().string();
    CAPTURE(name);
    CHECK(read_bytes(entry.path().string()) == read_bytes(b + "/" + name));
    ++files;
  }
  CHECK(std::distance(std::filesystem::directory_iterator(b),
                      std::filesystem::directory_iterator{}) == static_cast<std::ptrdiff_t>(files));
}

}  // namespace test_support
