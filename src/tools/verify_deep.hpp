// verify --deep: re-checks the stored rows of every checked column against the checks recorded in
// the manifest, so a dataset proves not only that its bytes are intact but that they obey its
// rules.
#pragma once

#include <string>
#include <vector>

#include "gpucache/dtype.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/validate.hpp"
#include "gpucache/verify.hpp"

namespace gpucache::detail {

// The rules --deep applies: `checks` (one per checked column, as resolve_column_checks() gives
// them from the manifest) with the column's norm bounds widened by the rounding error of its
// storage type `stored[i]` (a normalized column's to 1 +- that error), dedup only for columns
// stored as f32 (rounding can make distinct rows equal), and `recorded`'s pair bounds widened
// likewise; on the backend and threads of `options`. Nothing is sampled, shuffled or converted.
ValidationOptions deep_check_rules(const ValidationOptions& recorded,
                                   const std::vector<ColumnChecks>& checks,
                                   const std::vector<DType>& stored, const VerifyOptions& options);

void check_recorded_rules(const std::string& dataset_dir, const shard::Manifest& manifest,
                          const VerifyOptions& options, std::vector<Problem>& problems);

}  // namespace gpucache::detail
