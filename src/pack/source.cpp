#include "source.hpp"

#include "gpucache/input.hpp"

namespace gpucache::detail {

Source open_source(const std::string& path, const SourceOptions& options) {
  Source source;
  source.path = path;
  const Value root = read_input(path, ReadOptions{options.threads});
  auto mapping =
      std::make_shared<SourceMapping>(map_source(root, path, options.kind, options.fields, options.roles));
  source.rows = mapping->rows;
  source.columns = mapping->columns;
  source.mapping = std::move(mapping);
  return source;
}

}  // namespace gpucache::detail
