#include "probe_analysis.hpp"

#include <algorithm>
#include <unordered_map>

#include "gpucache/error.hpp"
#include "value_summary.hpp"

namespace gpucache::detail {

std::vector<ElementVariant> group_elements(const std::vector<const Value*>& elements) {
  std::vector<ElementVariant> variants;
  std::unordered_map<std::string, std::size_t> index_of;
  for (std::uint64_t i = 0; i < elements.size(); ++i) {
    std::string signature = value_signature(*elements[i], 0);
    auto [found, inserted] = index_of.try_emplace(signature, variants.size());
    if (inserted) variants.push_back({std::move(signature), 0, i});
    ++variants[found->second].count;
  }
  std::stable_sort(variants.begin(), variants.end(),
                   [](const auto& a, const auto& b) { return a.count > b.count; });
  return variants;
}

std::vector<const Value*> list_elements(const List& list) {
  std::vector<const Value*> elements;
  elements.reserve(list.items.size());
  for (const auto& item : list.items) elements.push_back(&item);
  return elements;
}

std::vector<const Value*> dict_values(const Dict& dict) {
  std::vector<const Value*> values;
  values.reserve(dict.items.size());
  for (const auto& [key, value] : dict.items) values.push_back(&value);
  return values;
}

std::string array_text(const InputColumn& column) {
  std::string text = column.path + ": " + std::string(column_kind_name(column.kind));
  if (column.kind == ColumnKind::text) return text + " [" + std::to_string(column.rows) + "]";
  // Appended piecewise: " " + std::string() trips GCC 12's -Wrestrict.
  text += ' ';
  text += dtype_name(column.dtype);
  text += " [";
  text += std::to_string(column.rows);
  for (std::uint64_t extent : column.row_shape) text += ", " + std::to_string(extent);
  text += column.kind == ColumnKind::sequence ? ", *]" : "]";
  if (column.time) {  // piecewise, as above
    text += ' ';
    text += describe_time(*column.time);
  }
  return text;
}

ProbeMapping try_mapping(const InputData& data, const std::string& origin,
                         const ProbeOptions& options) {
  ProbeMapping result;
  try {
    result.mapping = map_input(data, origin, options.kind, options.fields, options.roles);
  } catch (const Error& error) {
    // Shown under "layout: none", so the location "layout" would only repeat it.
    const bool plain = error.location().empty() || error.location() == "layout";
    result.error = plain ? error.cause() : error.location() + ": " + error.cause();
  }
  return result;
}

}  // namespace gpucache::detail
