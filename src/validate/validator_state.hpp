// What a Validator keeps between check_batch() and finish(): a few bytes per row, indexed by
// global row. Shared by validate.cpp (pass 1) and validate_finish.cpp (resolution and report).
#pragma once

#include <cstdint>
#include <vector>

#include "gpucache/validate.hpp"
#include "kernels/row_checks.cuh"
#include "compute_backend.hpp"

namespace gpucache {

namespace detail {
// Layout of the per-row status byte.
inline constexpr std::uint8_t kStatusReasonMask =
    0x07;                                            // DropReason code (provisional until finish)
inline constexpr std::uint8_t kStatusColumn = 0x08;  // set: the failing column is column 1
inline constexpr unsigned kStatusOverflowShift = 4;  // bits 4-5: column c would overflow
inline constexpr std::uint8_t kStatusOverflowMask = 0x30;
inline constexpr std::uint8_t kStatusSampledOut = 0x40;  // valid, but left out by sampling
inline constexpr std::uint8_t kStatusSeen = 0x80;        // a batch covered this row

struct ValidatorState {
  ValidatorState(ValidationOptions options_, std::vector<std::uint64_t> dims_, CheckParams params_,
                 ComputeBackend backend_)
      : options(std::move(options_)),
        dims(std::move(dims_)),
        params(params_),
        backend(std::move(backend_)) {}

  struct Batch {
    std::uint64_t first_row, rows;
    std::uint32_t source;
  };

  ValidationOptions options;
  std::vector<std::uint64_t> dims;
  CheckParams params;
  ComputeBackend backend;
  std::vector<std::uint8_t> status;
  std::vector<double> norms[kMaxColumns];
  std::vector<double> cosines;                     // only with pair_cos bounds
  std::vector<std::uint64_t> hashes[kMaxColumns];  // only with dedup
  std::vector<Batch> batches;
  std::vector<RowRecord> records;  // scratch for one batch
  bool finished = false;
};

}  // namespace detail
}  // namespace gpucache
