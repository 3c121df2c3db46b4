// `pack --append DATASET`: the inputs' rows become new shards of an existing dataset
// (docs/scale.md, "Append"). They are packed into DATASET/.append (a hidden staging dataset,
// resumable with
// --resume), checked against the dataset's columns and options, hard-linked into the dataset
// under the next shard numbers, and a new manifest with one more segment replaces the old one
// atomically. Existing shards are never opened for writing.
#pragma once

#include <nlohmann/json.hpp>

#include "gpucache/pack.hpp"

namespace gpucache::detail {

// The options as pack records them in the manifest (defined in pack.cpp).
nlohmann::ordered_json pack_options_json(const PackOptions& options);

PackResult pack_append(const PackOptions& options);

}  // namespace gpucache::detail
