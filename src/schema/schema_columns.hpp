// Builds one InputColumn from a field path: resolves it in the value tree, decides tensor or text,
// checks every row (dtype, size, bounds) without reading tensor data, and wires the row access
// to where the rows lie in the tree (tree_column.hpp).
#pragma once

#include <optional>
#include <string>

#include "gpucache/schema.hpp"

namespace gpucache::detail {

// `role`, when given, makes the column what that role needs (ColumnBuilder::apply_role); else it
// keeps the role its rows suggest (tensor, sequence or text). Throws gpucache::Error naming
// origin, the column and its path, and the offending row.
InputColumn build_column(const Value& root, const std::string& origin, const FieldSpec& field,
                         std::optional<ColumnRole> role = std::nullopt);

}  // namespace gpucache::detail
