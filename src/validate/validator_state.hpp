// What a Validator keeps between check_batch() and finish(): a few bytes per row, indexed by
// global row. Shared by validate.cpp (pass 1) and validate_finish.cpp (resolution and report).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "compute_backend.hpp"
#include "gpucache/common/spill_array.hpp"
#include "gpucache/validate.hpp"
#include "kernels/row_checks.cuh"
#include "row_status.hpp"

namespace gpucache {

namespace detail {

// One column as the Validator runs it: its recorded checks, the verdict's view of them, and the
// shape of its rows.
struct ValidatorColumn {
  ColumnChecks checks;
  ColumnRule rule;
  ColumnLayout layout;
  bool dedup = false;
  // Its norms are kept per row: it has the norm check (statistics) or is in the pair (cosine).
  bool keeps_norms = false;
};

struct ValidatorState {
  ValidatorState(ValidationOptions options_, std::vector<ValidatorColumn> columns_,
                 ComputeBackend backend_)
      : options(std::move(options_)), columns(std::move(columns_)), backend(std::move(backend_)) {}

  struct Batch {
    std::uint64_t first_row, rows;
    std::uint32_t source;
  };
  // The norm of column `column` of a dropped row when that column keeps no norms per row (or of
  // a kept row that overflows such a column, with on_overflow=drop): rare, so kept sparsely.
  struct DropNorm {
    std::uint64_t row;
    unsigned column;
    double norm;
    bool operator<(const DropNorm& other) const noexcept {
      return row != other.row ? row < other.row : column < other.column;
    }
  };

  ValidationOptions options;
  std::vector<ValidatorColumn> columns;
  std::optional<std::pair<unsigned, unsigned>> pair;  // the two pair_cos columns
  double cos_min = -INFINITY, cos_max = INFINITY;
  ComputeBackend backend;

  // Per-row arrays, indexed by global row: on the heap while small, then in unlinked files
  // (SpillPolicy, set by spill_to), released window by window as loops finish with them.
  SpillPolicy spill;
  SpillArray<RowStatus> status;
  std::vector<SpillArray<double>> norms;          // per column; empty unless keeps_norms
  SpillArray<double> cosines;                     // only with a pair
  std::vector<SpillArray<std::uint64_t>> hashes;  // per column; empty unless dedup
  std::vector<DropNorm> drop_norms;               // in batch order until finish() sorts them
  std::vector<Batch> batches;
  std::vector<NullRow> null_rows;  // ascending by row (Validator::drop_null_rows)
  bool finished = false;

  // Drops the resident pages of rows [first, first + count) of every per-row array.
  void release_rows(std::uint64_t first, std::uint64_t count) noexcept {
    status.release(first, count);
    for (auto& column : norms) column.release(first, count);
    for (auto& column : hashes) column.release(first, count);
    cosines.release(first, count);
  }

  bool any_dedup() const noexcept {
    for (const auto& column : columns)
      if (column.dedup) return true;
    return false;
  }
};

}  // namespace detail
}  // namespace gpucache
