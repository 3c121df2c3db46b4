// `gpucache probe`: what is in an input file and how pack would read it, without touching tensor
// data. Both renderings show the object tree (keys, types, dtypes, shapes, list lengths; long
// homogeneous lists and dicts are summarised, strings sampled), the detected layout and the
// column mapping with its equivalent --kind/--field flags, or why no mapping was found.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "gpucache/schema.hpp"
#include "gpucache/value.hpp"

namespace gpucache {

struct ProbeOptions {
  // Passed to map_source, so probe shows the mapping pack would use with the same flags.
  std::optional<SourceKind> kind;
  std::vector<FieldSpec> fields;
  std::vector<RoleSpec> roles;
  std::size_t max_keys = 32;  // dicts with more keys are summarised
  std::size_t max_depth = 8;  // deeper nodes are elided
  std::size_t string_samples = 3;
};

// Human-readable, several lines, ending in a newline. For an array reader's columns (readers.hpp
// InputData) the tree is a list of the arrays.
std::string probe_text(const Value& root, const std::string& origin,
                       const ProbeOptions& options = {});
std::string probe_text(const InputData& data, const std::string& origin,
                       const ProbeOptions& options = {});
// One JSON object: {"file", "tree", "layout" (null when none), "layout_error" (null when mapped)}.
// Tree nodes: {"type": "dict"|"list"|"tuple"|"str"|"int"|"float"|"bool"|"None"|"tensor", ...}
// with "dtype"/"shape" for tensors, "length" for containers, and for summarised containers
// "element" (one representative node), "variants" (mixed lists), "sample" (strings or keys).
std::string probe_json(const Value& root, const std::string& origin,
                       const ProbeOptions& options = {});
// For columns: "tree" is null and "arrays" lists {"path", "kind", "dtype", "shape"}.
std::string probe_json(const InputData& data, const std::string& origin,
                       const ProbeOptions& options = {});

}  // namespace gpucache
