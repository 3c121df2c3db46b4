// Recognises the three source kinds in a Value tree and proposes the --field paths for them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpucache/schema.hpp"

namespace gpucache::detail {

struct DetectedLayout {
  SourceKind kind = SourceKind::embeddings;
  std::vector<FieldSpec> fields;  // canonical paths, standard columns only
  std::string description;        // what was found, e.g. "a list of 1000 dicts with keys ..."
  // Columns of `fields` that fill a standard column under the user's own name (a lone float
  // block under the key `features` is the embedding column, named `features`): column -> the
  // standard column it fills. Names are the user's (issue #27).
  // (Initialised so that DetectedLayout{kind, fields, description} stays warning-free.)
  std::map<std::string, std::string> fills = {};
};

// Throws gpucache::Error (location "layout") when nothing is recognised or several candidates
// fit; the message says what was found and which --kind/--field flags would resolve it.
DetectedLayout detect_layout(const Value& root, const std::string& origin);
// The `tensors` layout of a root dict (every array sharing one row count, named after its key)
// or of a root tensor (one column named after the file); nothing when the root is neither.
std::optional<DetectedLayout> detect_tensor_columns(const Value& root, const std::string& origin);
// The column name layout detection gives a dict key: lower case, [a-z0-9_] only, not starting
// with a digit; empty when nothing of the key is left.
std::string column_name_from_key(std::string_view key);

}  // namespace gpucache::detail
