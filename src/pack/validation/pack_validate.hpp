// Pass 1 of pack: every checked column's rows go through the Validator (CPU or CUDA), which decides
// the rows kept and their output order. Which checks each column gets comes from its role and the
// options (plan_validation); the findings become manifest sections and the --rejects list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpucache/pack.hpp"
#include "gpucache/progress.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard_io/shard_writer.hpp"
#include "gpucache/validate.hpp"
#include "pack_inputs.hpp"

namespace gpucache::detail {

// What pass 1 runs: the columns the Validator reads, in column order, with their checks.
struct ValidationPlan {
  // Input columns the Validator reads: those with checks, and float columns stored as f16/bf16
  // from another type (checked for overflow only).
  std::vector<std::size_t> columns;
  std::vector<ColumnLayout> layouts;  // one per entry of `columns`
  ValidationOptions rules;            // the user's, with rules.columns one per entry of `columns`
  std::vector<ColumnChecks> every_column;  // the checks of every input column, in column order
  // False when there is nothing to check, sample or shuffle: every row is kept in input order.
  bool runs = false;

  bool checked(std::size_t k) const { return !(*rules.columns)[k].checks.empty(); }
};

// Each column's checks from its role (checks.hpp default_checks), --checks and --no-checks, and
// the dataset-wide bounds. Throws UsageError with one line for a --checks naming no column, a check
// a column cannot have, pair bounds without exactly two pair_cos columns of equal values per row,
// and bad norm bounds.
ValidationPlan plan_validation(const PackInputs& inputs, const std::vector<Column>& specs,
                               const PackOptions& options);
// The rules manifest.json records: the plan's, with the checks of every input column (an empty
// list for a column without checks).
ValidationOptions recorded_rules(const ValidationPlan& plan);

struct ValidationOutcome {
  ValidationResult result;           // result.rows: kept global rows in output order
  std::vector<std::size_t> columns;  // the embedding columns (stored with padding, normalisation)
  ValidationPlan plan;               // the columns checked (indices into the inputs) and how
  std::string device_description;    // empty when there was nothing to validate
};

std::vector<std::size_t> embedding_columns(const Source& source);

ValidationOutcome validate_inputs(const PackInputs& inputs, const std::vector<Column>& specs,
                                  const PackOptions& options, Progress& progress);

// The validation results in the manifest: "validated_columns" (the columns with checks),
// "rows_checked", "dropped", "sampled_out", "clamped_rows", "sources" and "norm_stats" (columns
// with the norm check); the rules are in "options".
void add_validation_sections(shard::Manifest& manifest, const ValidationOutcome& outcome,
                             const PackInputs& inputs);

// One JSON object per dropped row: the input file, its row, the reason, the column and the norm.
void write_rejects(const std::string& path, const ValidationOutcome& outcome,
                   const PackInputs& inputs, Durability durability);

}  // namespace gpucache::detail
