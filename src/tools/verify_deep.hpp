// verify --deep: re-checks the stored embedding rows against the validation rules recorded in the
// manifest, so a dataset proves not only that its bytes are intact but that they obey its rules.
#pragma once

#include <string>
#include <vector>

#include "gpucache/dtype.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/validate.hpp"
#include "gpucache/verify.hpp"

namespace gpucache::detail {

// The rules --deep applies to rows stored as `stored`: the recorded ones (as
// validation_options_from_json reads them from the manifest), widened by the rounding error of
// the storage type, on the backend and threads of `options`.
ValidationOptions deep_check_rules(const ValidationOptions& recorded, DType stored,
                                   const VerifyOptions& options);

void check_recorded_rules(const std::string& dataset_dir, const shard::Manifest& manifest,
                          const VerifyOptions& options, std::vector<Problem>& problems);

}  // namespace gpucache::detail
