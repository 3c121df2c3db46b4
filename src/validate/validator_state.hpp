// What a Validator keeps between check_batch() and finish(): a few bytes per row, indexed by
// global row. Shared by validate.cpp (pass 1) and validate_finish.cpp (resolution and report).
#pragma once

#include <cstdint>
#include <vector>

#include "compute_backend.hpp"
#include "gpucache/validate.hpp"
#include "kernels/row_checks.cuh"
#include "row_status.hpp"

namespace gpucache {

namespace detail {
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
  std::vector<RowStatus> status;  // indexed by global row
  std::vector<double> norms[kMaxColumns];
  std::vector<double> cosines;                     // only with pair_cos bounds
  std::vector<std::uint64_t> hashes[kMaxColumns];  // only with dedup
  std::vector<Batch> batches;
  std::vector<RowRecord> records;  // scratch for one batch
  bool finished = false;
};

}  // namespace detail
}  // namespace gpucache
