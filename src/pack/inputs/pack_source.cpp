#include "pack_source.hpp"

#include <algorithm>
#include <unordered_map>

#include "gpucache/column_name.hpp"
#include "gpucache/common/utf8.hpp"
#include "gpucache/error.hpp"
#include "gpucache/input.hpp"
#include "gpucache/memory_input.hpp"
#include "gpucache/shard/shard_layout.hpp"

namespace gpucache::detail {
namespace {

// The packer's provenance columns have a namespace of their own (shard::is_provenance_column), so
// a user's column can never be mistaken for them; a name in it can only come from the user
// spelling it, since keys from files are made legal before they get here.
Source checked_names(Source source) {
  for (const auto& column : source.columns) {
    // What a shard can name (SPEC.md "Names table"): said before any row is read, naming the
    // input, rather than by the shard writer at the end. Names from files are made legal by their
    // readers; only a caller's own (memory keys, --field) can fail here.
    if (shard::is_provenance_column(column.name))
      throw Error(source.path, "column '" + column.name.substr(0, 80) + "'",
                  std::string("names starting with '") + shard::kProvenancePrefix +
                      "' are the packer's own (its provenance columns " +
                      std::string(shard::kSourceColumn) + " and " +
                      std::string(shard::kSourceRowColumn) + "); give the column another name");
    if (!valid_column_name(column.name))
      throw Error(source.path,
                  "column '" + column.name.substr(0, 80) + (column.name.size() > 80 ? "...'" : "'"),
                  "is not a legal column name (" + std::string(kColumnNameRule) + "; this one is " +
                      std::to_string(column.name.size()) + " bytes); give the column another name");
  }
  return source;
}

bool names_file_column(const PackOptions& options, const std::string& column) {
  return std::any_of(options.fields.begin(), options.fields.end(), [&](const FieldSpec& field) {
    return !field.file.empty() && field.column == column;
  });
}

// Columns from files of their own (--field images=images.npy), joined row by row to what the
// input (when there is one) maps to: one source.
Source open_joined_source(const PackOptions& options) {
  if (options.inputs.size() > 1)
    throw UsageError(
        "columns from files of their own (--field COLUMN=FILE) join one input row by "
        "row; with " +
        std::to_string(options.inputs.size()) +
        " inputs, pack each separately or name every column with --field");
  SourceOptions mapped{options.kind, {}, {}, options.threads};
  for (const auto& field : options.fields)
    if (field.file.empty()) mapped.fields.push_back(field);
  for (const auto& role : options.roles)
    if (!names_file_column(options, role.column)) mapped.roles.push_back(role);
  Source source;
  SourceMapping joined;
  joined.kind = SourceKind::tensors;
  if (!options.inputs.empty()) {
    source = open_source(options.inputs.front(), mapped);
    joined = *source.mapping;
  }
  for (const auto& field : options.fields) {
    if (field.file.empty()) continue;
    InputColumn column =
        map_file_column(read_input(field.file, ReadOptions{options.threads}), field, options.roles);
    if (joined.find(column.name))
      throw UsageError("--field " + column.name + " names a column the input already has");
    if (!joined.columns.empty() && column.rows != joined.rows)
      throw Error(field.file, "--field " + field.column,
                  "has " + std::to_string(column.rows) + " rows but " + joined.origin + " has " +
                      std::to_string(joined.rows) + ": columns joined row by row need equal rows");
    if (joined.columns.empty()) {
      joined.origin = field.file;
      joined.rows = column.rows;
    }
    joined.fields.push_back(field);
    joined.columns.push_back(std::move(column));
  }
  if (joined.rows == 0) throw Error(joined.origin, "layout", "the columns have no rows");
  joined.explanation =
      "Columns joined row by row from " + std::to_string(input_files(options).size()) + " files.";
  source.path = joined.origin;
  source.rows = joined.rows;
  source.columns = joined.columns;
  source.mapping = std::make_shared<const SourceMapping>(std::move(joined));
  return source;
}

// An input's "fill" columns (InputMapping::fill_texts): text it lacks, the same in every row,
// said in its mapping's explanation.
void add_filled_columns(Source& source,
                        const std::vector<std::pair<std::string, std::string>>& fills,
                        std::size_t index) {
  SourceMapping mapping = *source.mapping;
  for (const auto& [column, text] : fills) {
    if (mapping.find(column))
      throw UsageError("--input-map input " + std::to_string(index) + " (" + source.path +
                       "): \"fill\" names column '" + column +
                       "', which the input has; fill only columns it lacks");
    mapping.columns.push_back(constant_text_column(column, text, mapping.rows, source.path));
    mapping.fields.push_back({column, "fill:" + column, ""});
    mapping.explanation += " Column " + column + " filled with the same text in every row.";
  }
  source.columns = mapping.columns;
  source.mapping = std::make_shared<const SourceMapping>(std::move(mapping));
}

}  // namespace

Source open_source(const std::string& path, const SourceOptions& options) {
  Source source;
  source.path = path;
  auto mapping =
      std::make_shared<SourceMapping>(map_input(read_input(path, ReadOptions{options.threads}),
                                                path, options.kind, options.fields, options.roles));
  source.rows = mapping->rows;
  source.columns = mapping->columns;
  source.mapping = std::move(mapping);
  return checked_names(std::move(source));
}

std::vector<Source> open_sources(const PackOptions& options) {
  if (!options.memory_columns.empty()) {
    Source source;
    source.path = "memory";
    auto mapping =
        std::make_shared<SourceMapping>(map_input(memory_input(options.memory_columns), "memory",
                                                  options.kind, options.fields, options.roles));
    source.rows = mapping->rows;
    source.columns = mapping->columns;
    source.mapping = std::move(mapping);
    return {checked_names(std::move(source))};
  }
  if (options.memory_tree) {
    // The tree a .pt of the same objects would give: mapped by map_source, as that file would be.
    Source source;
    source.path = "memory";
    auto mapping =
        std::make_shared<SourceMapping>(map_input(InputData{.tree = *options.memory_tree}, "memory",
                                                  options.kind, options.fields, options.roles));
    source.rows = mapping->rows;
    source.columns = mapping->columns;
    source.mapping = std::move(mapping);
    return {checked_names(std::move(source))};
  }
  const bool file_columns = std::any_of(options.fields.begin(), options.fields.end(),
                                        [](const FieldSpec& field) { return !field.file.empty(); });
  if (file_columns) return {checked_names(open_joined_source(options))};
  std::vector<Source> sources;
  for (std::size_t i = 0; i < options.inputs.size(); ++i) {
    // A mixed project (--input-map): each input with its own mapping.
    SourceOptions mapped{options.kind, options.fields, options.roles, options.threads};
    if (!options.input_mappings.empty()) {
      const InputMapping& own = options.input_mappings[i];
      mapped = {own.kind, own.fields, own.roles, options.threads};
    }
    try {
      sources.push_back(open_source(options.inputs[i], mapped));
    } catch (const UsageError& error) {
      if (options.input_mappings.empty()) throw;
      // A mapping's mistake (a bad column name, a --role for a column it lacks) names its entry.
      throw UsageError("--input-map input " + std::to_string(i) + " (" + options.inputs[i] +
                       "): " + error.what());
    }
    if (!options.input_mappings.empty() && !options.input_mappings[i].fill_texts.empty())
      add_filled_columns(sources.back(), options.input_mappings[i].fill_texts, i);
    sources.back().input_index = static_cast<std::uint32_t>(sources.size() - 1);
  }
  return sources;
}

FieldsNotPacked fields_not_packed(const std::vector<Source>& sources, bool strict) {
  FieldsNotPacked found;
  // A file listed twice in a mixed project (its questions, then its answers) is told apart by
  // its place among the inputs.
  std::unordered_map<std::string, std::size_t> listings;
  for (const auto& source : sources) ++listings[source.path];
  for (const auto& source : sources) {
    if (!source.mapping) continue;
    const bool listed_twice = listings[source.path] > 1;
    const std::string input =
        listed_twice ? source.path + " (input " + std::to_string(source.input_index) + ")"
                     : source.path;
    for (const auto& entry : source.mapping->left_out) {
      if (strict)
        throw Error(source.path, "field '" + entry.field + "'",
                    "cannot be stored (" + entry.reason +
                        "), and --strict refuses to leave it out; leave out --strict to pack "
                        "without it, or drop the field from the input");
      found.left_out.push_back({input, entry.field, entry.reason});
    }
    for (const auto& field : source.mapping->not_selected)
      found.not_selected.emplace_back(input, field);
    for (const auto& entry : source.mapping->renamed)
      found.renamed.push_back({input, entry.field, entry.column});
  }
  return found;
}

nlohmann::ordered_json renamed_json(const std::vector<RenamedInputField>& renamed) {
  auto list = nlohmann::ordered_json::array();
  for (const auto& entry : renamed)
    list.push_back({{"input", entry.input}, {"field", entry.field}, {"column", entry.column}});
  return list;
}

std::vector<InputConversion> input_conversions(const std::vector<Source>& sources) {
  std::vector<InputConversion> found;
  for (const auto& source : sources)
    for (const auto& column : source.columns)
      if (!column.conversion.empty())
        found.push_back({source.path, column.name, column.path, column.conversion});
  return found;
}

nlohmann::ordered_json input_conversions_json(const std::vector<InputConversion>& conversions) {
  auto list = nlohmann::ordered_json::array();
  for (const auto& entry : conversions)
    list.push_back({{"input", entry.input},
                    {"column", entry.column},
                    {"field", entry.field},
                    {"conversion", entry.conversion}});
  return list;
}

nlohmann::ordered_json left_out_json(const std::vector<LeftOutInputField>& left_out) {
  auto list = nlohmann::ordered_json::array();
  for (const auto& entry : left_out)
    list.push_back({{"input", entry.input}, {"field", entry.field}, {"reason", entry.reason}});
  return list;
}

std::vector<std::string> input_files(const PackOptions& options) {
  std::vector<std::string> files = options.inputs;
  for (const auto& field : options.fields)
    if (!field.file.empty() && std::find(files.begin(), files.end(), field.file) == files.end())
      files.push_back(field.file);
  return files;
}

}  // namespace gpucache::detail
