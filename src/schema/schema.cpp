// map_source: detection and --field paths combined into one checked set of columns; plus the
// cross-input check and the small text helpers the CLI needs for the same flags.
#include "gpucache/schema.hpp"
#include "gpucache/column_name.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "gpucache/common/error_text.hpp"
#include "gpucache/common/float_convert.hpp"
#include "gpucache/error.hpp"
#include "schema_columns.hpp"
#include "schema_detect.hpp"
#include "schema_left_out.hpp"
#include "schema_path.hpp"
#include "value_summary.hpp"

namespace gpucache {
namespace {

struct StandardColumn {
  std::string_view name;
  ColumnRole role;
  bool required;
};

std::vector<StandardColumn> standard_columns(SourceKind kind) {
  switch (kind) {
    case SourceKind::dialogue:
      return {{"question_embedding", ColumnRole::embedding, true},
              {"answer_embedding", ColumnRole::embedding, true},
              {"question", ColumnRole::text, false},
              {"answer", ColumnRole::text, false}};
    case SourceKind::embeddings:
      return {{"embedding", ColumnRole::embedding, true}, {"text", ColumnRole::text, false}};
    case SourceKind::llm_cache:
      return {{"text", ColumnRole::text, true}, {"embedding", ColumnRole::embedding, true}};
    case SourceKind::tensors:
      return {};
  }
  return {};
}

const StandardColumn* find_standard(const std::vector<StandardColumn>& columns,
                                    std::string_view name) {
  for (const auto& column : columns)
    if (column.name == name) return &column;
  return nullptr;
}

// Embeddings and LLM caches have the same columns; only the label differs.
bool interchangeable(SourceKind a, SourceKind b) {
  auto embedding_kind = [](SourceKind kind) {
    return kind == SourceKind::embeddings || kind == SourceKind::llm_cache;
  };
  return a == b || (embedding_kind(a) && embedding_kind(b));
}

std::string shell_quote(std::string_view text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_-./=:@,").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(text);
  // Control characters (keys from files may hold any) cannot sit in '...': bash's $'...' spells
  // them, so the flag still pastes as one line.
  if (std::any_of(text.begin(), text.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string ansi = "$'";
    for (char c : text) {
      const auto byte = static_cast<unsigned char>(c);
      if (c == '\\' || c == '\'') {
        ansi += '\\';
        ansi += c;
      } else if (byte < 0x20 || byte == 0x7f) {
        ansi += "\\x";
        ansi += kDigits[byte >> 4];
        ansi += kDigits[byte & 15];
      } else {
        ansi += c;
      }
    }
    return ansi + "'";
  }
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'')
      quoted += "'\\''";
    else
      quoted += c;
  }
  return quoted + "'";
}

bool has_column(const std::vector<FieldSpec>& fields, std::string_view column) {
  return std::any_of(fields.begin(), fields.end(),
                     [&](const FieldSpec& field) { return field.column == column; });
}

std::string column_names(const SourceMapping& mapping) {
  std::string text;
  for (const auto& column : mapping.columns) text += (text.empty() ? "" : ", ") + column.name;
  return text;
}

// Whether `name` is the name a field at `path` has in its input: the keys ending its path, joined
// by '.' (`[*].meta.lang` is `meta.lang` or `lang`, `payload.x` is `x` or `payload.x`, as the
// layout's rows lie). Data without a key of its own (the root, a dict's keys, the values of a
// text -> vector dict) has no name to keep, so any name is its own.
bool is_own_name(const std::string& path, const std::string& name) {
  const detail::KeyPath segments = detail::parse_path(path);
  std::size_t first = 0;
  for (std::size_t i = 0; i < segments.size(); ++i)
    if (segments[i].kind != detail::PathSegment::Kind::key) first = i + 1;
  if (first == segments.size()) return true;
  std::string suffix;
  for (std::size_t i = segments.size(); i-- > first;) {
    suffix = segments[i].key + (suffix.empty() ? "" : "." + suffix);
    if (suffix == name) return true;
  }
  return false;
}

}  // namespace

void note_renamed_columns(SourceMapping& mapping, const std::vector<FieldSpec>& fields, bool tree) {
  const auto standards = standard_columns(mapping.kind);
  for (const auto& column : mapping.columns) {
    // A name the user gave (--field), or the layout's standard name for its column, is meant.
    if (has_column(fields, column.name) || find_standard(standards, column.name)) continue;
    std::string_view bare = column.path;
    while (!bare.empty() && bare.front() == '/') bare.remove_prefix(1);
    const bool own = tree ? is_own_name(column.path, column.name) : bare == column.name;
    if (!own) mapping.renamed.push_back({column.path, column.name});
  }
}

std::string_view source_kind_name(SourceKind kind) noexcept {
  switch (kind) {
    case SourceKind::dialogue:
      return "dialogue";
    case SourceKind::embeddings:
      return "embeddings";
    case SourceKind::llm_cache:
      return "llm-cache";
    case SourceKind::tensors:
      return "tensors";
  }
  return "unknown";
}

std::optional<SourceKind> parse_source_kind(std::string_view name) noexcept {
  if (name == "dialogue") return SourceKind::dialogue;
  if (name == "embeddings") return SourceKind::embeddings;
  if (name == "llm-cache" || name == "llm_cache") return SourceKind::llm_cache;
  if (name == "tensors") return SourceKind::tensors;
  return std::nullopt;
}

FieldSpec parse_field_spec(std::string_view text) {
  const auto equals = text.find('=');
  if (equals == std::string_view::npos)
    throw UsageError("--field '" + std::string(text) + "': expected COLUMN=PATH");
  FieldSpec field{std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)), ""};
  if (!valid_column_name(field.column))
    throw UsageError("--field '" + std::string(text) + "': column name '" + field.column +
                     "' is not a legal column name (" + std::string(kColumnNameRule) + ")");
  // A file of its own: the whole value when it names a file, or the part before a ':' that does.
  const std::string value = field.path;
  std::error_code error;
  if (std::filesystem::is_regular_file(value, error)) {
    field.file = value;
    field.path.clear();
  } else {
    for (auto colon = value.find(':'); colon != std::string::npos;
         colon = value.find(':', colon + 1)) {
      if (colon > 0 && std::filesystem::is_regular_file(value.substr(0, colon), error)) {
        field.file = value.substr(0, colon);
        field.path = value.substr(colon + 1);
        break;
      }
    }
  }
  if (field.file.empty() || !field.path.empty())
    detail::parse_path(field.path);  // throws UsageError with the column of the mistake
  return field;
}

InputColumn map_file_column(const InputData& data, const FieldSpec& field,
                            const std::vector<RoleSpec>& roles) {
  std::string path = field.path;
  if (path.empty() || path == ".") {
    // The one array the file holds: a root tensor, the only array of a dict, the only column.
    std::vector<std::string> found;
    if (data.columnar()) {
      for (const auto& column : data.columns) found.push_back(column.path);
    } else if (data.tree.as_tensor()) {
      found.push_back(".");
    } else if (const auto layout = detail::detect_tensor_columns(data.tree, field.file)) {
      for (const auto& candidate : layout->fields) found.push_back(candidate.path);
    }
    if (found.size() != 1) {
      std::string listing;
      for (const auto& candidate : found) listing += (listing.empty() ? "" : ", ") + candidate;
      throw Error(field.file, "--field " + field.column,
                  found.empty() ? "holds no array to make a column of"
                                : "holds " + std::to_string(found.size()) + " arrays (" + listing +
                                      "); name one with --field " + field.column + "=" +
                                      field.file + ":PATH");
    }
    path = found.front();
  }
  std::vector<RoleSpec> own_roles;
  for (const auto& role : roles)
    if (role.column == field.column) own_roles.push_back(role);
  return map_input(data, field.file, SourceKind::tensors, {{field.column, path, ""}}, own_roles)
      .columns.front();
}

RoleSpec parse_role_spec(std::string_view text) {
  const auto equals = text.find('=');
  if (equals == std::string_view::npos)
    throw UsageError("--role '" + std::string(text) + "': expected COLUMN=ROLE");
  const std::string column(text.substr(0, equals));
  if (!valid_column_name(column))
    throw UsageError("--role '" + std::string(text) + "': column name '" + column +
                     "' is not a legal column name (" + std::string(kColumnNameRule) + ")");
  const auto role = parse_column_role(text.substr(equals + 1));
  if (!role)
    throw UsageError("--role '" + std::string(text) +
                     "': the role must be embedding, tensor, sequence or text");
  return {column, *role};
}

std::string format_field_flag(const FieldSpec& field) {
  const std::string value = field.file.empty()   ? field.path
                            : field.path.empty() ? field.file
                                                 : field.file + ":" + field.path;
  return "--field " + shell_quote(field.column + "=" + value);
}

std::string format_flags(SourceKind kind, const std::vector<FieldSpec>& fields) {
  std::string text = "--kind " + std::string(source_kind_name(kind));
  for (const auto& field : fields) {
    text += ' ';  // piecewise: " " + std::string trips GCC 12's -Wrestrict false positive
    text += format_field_flag(field);
  }
  return text;
}

std::optional<ColumnRole> layout_role(SourceKind kind, std::string_view standard_column) {
  // Named, not a temporary: find_standard returns a pointer into the list.
  const std::vector<StandardColumn> standards = standard_columns(kind);
  if (const auto* standard = find_standard(standards, standard_column)) return standard->role;
  return std::nullopt;
}

const InputColumn* SourceMapping::find(std::string_view column) const noexcept {
  for (const auto& candidate : columns)
    if (candidate.name == column) return &candidate;
  return nullptr;
}

SourceMapping map_source(const Value& root, const std::string& origin,
                         std::optional<SourceKind> kind, const std::vector<FieldSpec>& fields,
                         const std::vector<RoleSpec>& roles) {
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (!valid_column_name(fields[i].column))
      throw UsageError("--field column name '" + fields[i].column +
                       "' is not a legal column name (" + std::string(kColumnNameRule) + ")");
    detail::parse_path(fields[i].path);
    for (std::size_t j = 0; j < i; ++j) {
      if (fields[j].column == fields[i].column)
        throw UsageError("--field " + fields[i].column + " is given twice");
    }
  }

  std::optional<detail::DetectedLayout> detected;
  std::optional<Error> detection_error;
  try {
    detected = detail::detect_layout(root, origin);
  } catch (const Error& error) {
    if (fields.empty()) throw;
    detection_error = error;
  }

  const bool names_dialogue = std::any_of(fields.begin(), fields.end(), [](const FieldSpec& field) {
    return find_standard(standard_columns(SourceKind::dialogue), field.column) != nullptr;
  });
  SourceKind final_kind;
  if (kind) {
    final_kind = *kind;
  } else if (names_dialogue) {
    final_kind = SourceKind::dialogue;
  } else if (detected) {
    final_kind = detected->kind;
  } else if (has_column(fields, "embedding")) {
    final_kind = SourceKind::embeddings;
  } else if (!fields.empty()) {
    final_kind = SourceKind::tensors;  // columns named by --field alone
  } else {
    throw *detection_error;
  }
  // --kind tensors over a layout detected as something else: every array is a column.
  if (final_kind == SourceKind::tensors && (!detected || detected->kind != SourceKind::tensors)) {
    detected = detail::detect_tensor_columns(root, origin);
    if (!detected && fields.empty())
      throw Error(origin, "layout",
                  "--kind tensors needs a dict of arrays (or one array) at the root; name the "
                  "columns with --field COLUMN=PATH");
  }
  const auto standards = standard_columns(final_kind);

  // Explicit fields first; detection fills in the standard columns they leave out.
  std::vector<FieldSpec> plan = fields;
  const bool detection_fits = detected && interchangeable(detected->kind, final_kind);
  bool used_detection = false;
  // Planned columns that fill a standard column under another name (column -> standard).
  std::map<std::string, std::string> fills;
  if (detection_fits) {
    // A set of the planned names, not a search of the plan per field: a detected layout may
    // have 10^6 columns (a safetensors file of that many tensors).
    std::unordered_set<std::string> planned;
    for (const auto& field : plan) planned.insert(field.column);
    // The paths --field maps, canonical as detection's are: a detected column at one of them is
    // that field's column under the user's name, not a second copy of the same data
    // (`--field features=[*].features` over a lone block of float vectors).
    // (A field named as a standard column is that column, whatever path it gives.)
    std::unordered_map<std::string, std::string> explicit_paths;
    for (const auto& field : fields)
      if (field.file.empty() && !find_standard(standards, field.column))
        explicit_paths.emplace(detail::format_path(detail::parse_path(field.path)), field.column);
    // Standard columns the plan has (by name, or filled under another name): detection adds no
    // second one (`--field embedding=x` over a lone block `features` keeps only `embedding`).
    std::unordered_set<std::string> covered;
    for (const auto& field : fields)
      if (find_standard(standards, field.column)) covered.insert(field.column);
    for (const auto& field : detected->fields) {
      const auto filled = detected->fills.find(field.column);
      const std::string standard =
          filled != detected->fills.end() ? filled->second : std::string(field.column);
      // Standard columns the fields leave out; extra columns of the layout too, unless the
      // fields name columns explicitly.
      const bool is_standard = find_standard(standards, standard) != nullptr;
      if (const auto same = explicit_paths.find(field.path); same != explicit_paths.end()) {
        if (is_standard && same->second != standard && covered.insert(standard).second)
          fills[same->second] = standard;
        continue;
      }
      if (is_standard && covered.count(standard)) continue;
      const bool wanted = is_standard || fields.empty();
      if (wanted && planned.insert(field.column).second) {
        plan.push_back(field);
        if (standard != field.column) fills[field.column] = standard;
        if (is_standard) covered.insert(standard);
        used_detection = true;
      }
    }
  }
  // The standard column a planned column is, by its name or by what it fills; empty for none.
  auto standard_of = [&](const std::string& column) -> std::string {
    if (const auto filled = fills.find(column); filled != fills.end()) return filled->second;
    return find_standard(standards, column) ? column : std::string();
  };
  std::string missing;
  for (const auto& standard : standards) {
    const bool present = std::any_of(plan.begin(), plan.end(), [&](const FieldSpec& field) {
      return standard_of(field.column) == standard.name;
    });
    if (standard.required && !present)
      missing += " --field " + std::string(standard.name) + "=PATH";
  }
  if (!missing.empty()) {
    std::string cause;
    if (detected && !detection_fits)
      cause = "--kind " + std::string(source_kind_name(final_kind)) +
              " was asked for, but the input looks like " +
              std::string(source_kind_name(detected->kind)) + " (" + detected->description + ")";
    else if (detected)
      cause = "found " + detected->description + ", but not every column " +
              std::string(source_kind_name(final_kind)) + " needs";
    else
      cause = detection_error->cause();
    throw Error(origin, "layout", cause + ". Name the missing column(s) with" + missing);
  }

  // Standard columns in their fixed order, then extra columns in the order given.
  std::vector<FieldSpec> ordered;
  for (const auto& standard : standards) {
    for (const auto& field : plan)
      if (standard_of(field.column) == standard.name) ordered.push_back(field);
  }
  for (const auto& field : plan)
    if (standard_of(field.column).empty()) ordered.push_back(field);

  for (const auto& role : roles) {
    if (!has_column(ordered, role.column)) {
      std::string names;
      for (const auto& field : ordered) names += (names.empty() ? "" : ", ") + field.column;
      throw UsageError("--role names column '" + role.column + "', which " + origin +
                       " does not map (its columns: " + names + ")");
    }
  }
  SourceMapping mapping;
  mapping.kind = final_kind;
  mapping.origin = origin;
  for (const auto& field : ordered) {
    std::optional<ColumnRole> role = layout_role(final_kind, standard_of(field.column));
    for (const auto& given : roles)
      if (given.column == field.column) role = given.role;
    mapping.columns.push_back(detail::build_column(root, origin, field, role));
    const InputColumn& column = mapping.columns.back();
    mapping.fields.push_back({column.name, column.path});
  }

  mapping.rows = mapping.columns.front().rows;
  const bool rows_agree =
      std::all_of(mapping.columns.begin(), mapping.columns.end(),
                  [&](const InputColumn& column) { return column.rows == mapping.rows; });
  if (!rows_agree) {
    std::string counts;
    for (const auto& column : mapping.columns)
      counts += (counts.empty() ? " " : "; ") + column.name + ": " + std::to_string(column.rows) +
                " rows (path " + detail::quoted(column.path, detail::kShownChars, '\'') + ")";
    throw Error(origin, "layout", "columns disagree on the number of rows:" + counts);
  }
  if (mapping.rows == 0) throw Error(origin, "layout", "the columns have no rows");
  // Every other field beside the columns: a column too, or named with why it is not one.
  detail::add_remaining_fields(root, origin, fields.empty(), mapping);
  note_renamed_columns(mapping, fields, true);

  if (fields.empty()) {
    mapping.explanation = "Detected " + std::string(source_kind_name(detected->kind)) + " in " +
                          detected->description + ".";
  } else {
    std::string given;
    for (const auto& field : fields) given += (given.empty() ? "" : ", ") + field.column;
    mapping.explanation = "Columns " + given + " from --field";
    if (used_detection) mapping.explanation += "; the others detected in " + detected->description;
    mapping.explanation += ".";
  }
  if (kind && detected && detection_fits && detected->kind != *kind)
    mapping.explanation += " Labelled " + std::string(source_kind_name(*kind)) + " as asked (it " +
                           "has the same columns as " +
                           std::string(source_kind_name(detected->kind)) + ").";
  return mapping;
}

bool memory_dict_is_llm_cache(const Value& root) {
  const Dict* dict = root.as_dict();
  if (!dict || dict->items.empty() ||
      !std::all_of(dict->items.begin(), dict->items.end(),
                   [](const auto& item) { return item.second.as_tensor() != nullptr; }))
    return false;
  try {
    const auto layout = detail::detect_layout(root, "memory");
    return layout.kind == SourceKind::llm_cache && !layout.fields.empty() &&
           layout.fields.front().path == "@keys";
  } catch (const Error&) {
    return false;  // no layout the .pt reader knows: the dict's values are columns
  }
}

void check_compatible(const std::vector<SourceMapping>& mappings) {
  if (mappings.size() < 2) return;
  // "a.pt: dialogue; b.pt: embeddings", on the message's one line.
  auto listing = [&](auto&& describe) {
    std::string text;
    for (const auto& mapping : mappings)
      text += (text.empty() ? " " : "; ") + detail::escaped(mapping.origin, 256) + ": " +
              describe(mapping);
    return text;
  };
  const auto& first = mappings.front();
  // A column one input has and another lacks: name both, the column, and the two ways out.
  for (const auto& mapping : mappings) {
    auto lacks = [&](const SourceMapping& without, const SourceMapping& with,
                     const std::string& column) {
      throw Error(
          "", "inputs",
          detail::escaped(without.origin, 256) + " (" +
              std::string(source_kind_name(without.kind)) + ") has no column '" + column +
              "', which " + detail::escaped(with.origin, 256) + " (" +
              std::string(source_kind_name(with.kind)) +
              ") has; map a field of it to that column (its own fields in --input-map, "
              "or gpucache.Input(PATH, fields={'" +
              column + "': PATH})), give a text column the same text in every row (\"fill\": {\"" +
              column + "\": \"\"}, or fill={'" + column +
              "': ''}), or map the other inputs without it. Columns:" + listing(column_names));
    };
    for (const auto& column : first.columns)
      if (!mapping.find(column.name)) lacks(mapping, first, column.name);
    for (const auto& column : mapping.columns)
      if (!first.find(column.name)) lacks(first, mapping, column.name);
  }
  for (const auto& column : first.columns) {
    auto describe = [&](const SourceMapping& mapping) {
      const InputColumn& other = *mapping.find(column.name);
      std::string text =
          std::string(column_role_name(other.role)) + " " + std::string(dtype_name(other.dtype));
      if (other.kind == ColumnKind::tensor) {
        text += " [";
        for (std::size_t d = 0; d < other.row_shape.size(); ++d)
          text += (d ? ", " : "") + std::to_string(other.row_shape[d]);
        text += "]";
      }
      if (other.time) {  // appended piecewise: " " + std::string() trips GCC 12's -Wrestrict
        text += ' ';
        text += describe_time(*other.time);
      }
      return text;
    };
    for (const auto& mapping : mappings) {
      const InputColumn& other = *mapping.find(column.name);
      const bool same_kind = other.kind == column.kind && other.role == column.role;
      const bool same_shape = other.row_shape == column.row_shape;
      const bool both_float =
          detail::widens_to_f32(other.dtype) && detail::widens_to_f32(column.dtype);
      const bool same_dtype =
          column.kind == ColumnKind::text || other.dtype == column.dtype || both_float;
      const bool same_time = other.time == column.time;
      if (!same_kind || !same_shape || !same_dtype || !same_time)
        throw Error("", "inputs",
                    "disagree on column " + column.name + " (" +
                        (!same_kind    ? "kinds or roles differ"
                         : !same_shape ? "row shapes differ"
                         : !same_dtype ? "dtypes differ"
                                       : "time units or zones differ") +
                        "):" + listing(describe));
    }
  }
}

}  // namespace gpucache
