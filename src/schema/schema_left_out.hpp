// The fields of a tree input beside the columns a mapping made: every one becomes a column too
// (when no --field chose the columns) or is named, with why it cannot be stored, so nothing of
// the user's data is dropped without a word.
#pragma once

#include <string>

#include "gpucache/schema.hpp"

namespace gpucache::detail {

// Looks at the dicts the mapping's columns come from (the rows of a list of dicts, `[*].KEY`, or
// the dict of parallel arrays, `KEY`) and handles each key no column reads: nested dicts by their
// keys (dotted names, "meta.lang"), anything else as a column when it holds one value per row.
// With `take_columns` those columns join the mapping; without (--field chose the columns), they
// are listed in mapping.not_selected. What makes no column goes to mapping.left_out with why.
void add_remaining_fields(const Value& root, const std::string& origin, bool take_columns,
                          SourceMapping& mapping);

}  // namespace gpucache::detail
