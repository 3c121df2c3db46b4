// One opened input of `gpucache pack`, seen as columns of rows: what pack needs from any reader,
// whatever the file format and layout.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpucache/input_column.hpp"
#include "gpucache/schema.hpp"

namespace gpucache::detail {

struct Source {
  std::string path;
  std::uint64_t rows = 0;
  std::vector<InputColumn> columns;  // keep the parsed input (and its memory map) alive
  std::shared_ptr<const SourceMapping> mapping;
};

struct SourceOptions {
  std::optional<SourceKind> kind;  // --kind; detected when unset
  std::vector<FieldSpec> fields;   // --field COLUMN=PATH
  std::vector<RoleSpec> roles;     // --role COLUMN=ROLE
  unsigned threads = 0;            // --threads: what the reader may use (ReadOptions)
};

// Reads any supported input (the inputs module's registry) and maps it to columns (schema.hpp).
Source open_source(const std::string& path, const SourceOptions& options);

}  // namespace gpucache::detail
