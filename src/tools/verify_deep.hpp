// verify --deep: re-checks the stored embedding rows against the validation rules recorded in the
// manifest, so a dataset proves not only that its bytes are intact but that they obey its rules.
#pragma once

#include <string>
#include <vector>

#include "gpucache/shard/manifest.hpp"
#include "gpucache/verify.hpp"

namespace gpucache::detail {

void check_recorded_rules(const std::string& dataset_dir, const shard::Manifest& manifest,
                          const VerifyOptions& options, std::vector<Problem>& problems);

}  // namespace gpucache::detail
