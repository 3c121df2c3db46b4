// The validation rules and drop counts as manifest.json records them. Pack writes them and
// verify --deep reads them back with these functions only, so the two cannot drift apart. Kept out
// of validate.hpp so that only the users of JSON include nlohmann/json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gpucache/validate.hpp"

namespace gpucache {

// The "validation" object of the manifest's "options": every rule, one key each, in a fixed order
// (packs are byte-identical across versions). output_dtype, device and threads are not rules:
// the stored columns carry their dtype, and the backend and thread count never change the bytes.
// The per-column checks (options.columns, when set: pack always sets them, one entry per input
// column, with an empty list for a column without checks) are written last, as "columns".
// Infinite bounds are written as "inf".
nlohmann::ordered_json validation_options_to_json(const ValidationOptions& options);

// The rules back from that object. A key that is absent keeps ValidationOptions' default, a key
// gpucache does not know is ignored (a newer version's rule), and a value of the wrong type throws
// gpucache::Error(file, "options.validation.KEY", cause). output_dtype, device and threads are
// left at their defaults. Without "columns", options.columns stays unset: the checked columns
// (the manifest's "validated_columns") have legacy_column_checks() (resolve_column_checks()).
ValidationOptions validation_options_from_json(const nlohmann::ordered_json& json,
                                               const std::string& file);

// {"nan_inf": N, ...}: the count of every reason that drops a row, named and ordered as in
// kDropReasons (gpucache/drop_reason.hpp). Used for `pack --json` and the manifest's "dropped".
nlohmann::ordered_json reason_counts_to_json(const ReasonCounts& counts);

}  // namespace gpucache
