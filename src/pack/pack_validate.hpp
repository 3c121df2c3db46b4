// Pass 1 of pack: every row of every embedding column goes through the Validator (CPU or CUDA),
// which decides the rows kept and their output order. Also turns its findings into manifest
// sections and the --rejects list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard_io/shard_writer.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/progress.hpp"
#include "gpucache/validate.hpp"
#include "pack_inputs.hpp"

namespace gpucache::detail {

struct ValidationOutcome {
  ValidationResult result;           // result.rows: kept global rows in output order
  std::vector<std::size_t> columns;  // the embedding columns checked (indices into the inputs)
  std::string device_description;    // empty when there was nothing to validate
};

// The validation options pack uses: the user's, with the storage type of the embedding columns.
ValidationOptions effective_validation_options(const PackOptions& options,
                                               const std::vector<Column>& specs,
                                               const std::vector<std::size_t>& embedding_columns);
std::vector<std::size_t> embedding_columns(const Source& source);

ValidationOutcome validate_inputs(const PackInputs& inputs,
                                  const std::vector<Column>& specs,
                                  const PackOptions& options, Progress& progress);

// The validation results in the manifest: "validated_columns", "rows_checked", "dropped",
// "sampled_out", "clamped_rows", "sources" and "norm_stats" (the rules are in "options").
void add_validation_sections(shard::Manifest& manifest, const ValidationOutcome& outcome,
                             const PackInputs& inputs);

// One JSON object per dropped row: the input file, its row, the reason, the column and the norm.
void write_rejects(const std::string& path, const ValidationOutcome& outcome,
                   const PackInputs& inputs);

}  // namespace gpucache::detail
