// Builds one InputColumn from a field path: resolves it in the value tree, decides tensor or text,
// checks every row (dtype, size, bounds) without reading tensor data, and wires the row access
// to where the rows lie in the tree (tree_column.hpp).
#pragma once

#include <string>

#include "gpucache/schema.hpp"

namespace gpucache::detail {

// Throws gpucache::Error naming origin, the column and its path, and the offending row.
InputColumn build_column(const Value& root, const std::string& origin, const FieldSpec& field);

}  // namespace gpucache::detail
