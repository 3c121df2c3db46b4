// Builds one ColumnSource from a field path: resolves it, decides numeric or text, and checks
// every row (dtype, size, bounds) without reading tensor data.
#pragma once

#include <string>

#include "gpucache/schema.hpp"

namespace gpucache::detail {

// Throws gpucache::Error naming origin, the column and its path, and the offending row.
ColumnSource build_column(const Value& root, const std::string& origin, const FieldSpec& field);

}  // namespace gpucache::detail
