// map_source: detection and --field paths combined into one checked set of columns; plus the
// cross-input check and the small text helpers the CLI needs for the same flags.
#include "gpucache/schema.hpp"

#include <algorithm>
#include <cctype>

#include "gpucache/error.hpp"
#include "schema_columns.hpp"
#include "schema_detect.hpp"
#include "gpucache/common/float_convert.hpp"
#include "schema_path.hpp"
#include "value_summary.hpp"

namespace gpucache {
namespace {

struct StandardColumn {
  std::string_view name;
  ColumnKind kind;
  bool required;
};

std::vector<StandardColumn> standard_columns(SourceKind kind) {
  switch (kind) {
    case SourceKind::dialogue:
      return {{"question_embedding", ColumnKind::tensor, true},
              {"answer_embedding", ColumnKind::tensor, true},
              {"question", ColumnKind::text, false},
              {"answer", ColumnKind::text, false}};
    case SourceKind::embeddings:
      return {{"embedding", ColumnKind::tensor, true}, {"text", ColumnKind::text, false}};
    case SourceKind::llm_cache:
      return {{"text", ColumnKind::text, true}, {"embedding", ColumnKind::tensor, true}};
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
  return a == b || (a != SourceKind::dialogue && b != SourceKind::dialogue);
}

bool valid_column_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  if (!(std::islower(static_cast<unsigned char>(name.front())) || name.front() == '_'))
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string shell_quote(std::string_view text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_-./=:@,").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(text);
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

void check_column_type(const InputColumn& column, const StandardColumn& standard) {
  const std::string where = "column " + column.name + " (path '" + column.path + "')";
  if (standard.kind == ColumnKind::text && column.kind != ColumnKind::text)
    throw Error(column.origin, where,
                "must be text but holds numbers (" + std::string(dtype_name(column.dtype)) + ", " +
                    std::to_string(column.dim()) + " per row)");
  if (standard.kind == ColumnKind::tensor) {
    if (column.kind != ColumnKind::tensor)
      throw Error(column.origin, where, "must hold vectors but holds text");
    if (!detail::widens_to_f32(column.dtype))
      throw Error(column.origin, where,
                  "has dtype " + std::string(dtype_name(column.dtype)) +
                      "; embeddings must be f16, bf16, f32 or f64");
  }
}

std::string column_names(const SourceMapping& mapping) {
  std::string text;
  for (const auto& column : mapping.columns) text += (text.empty() ? "" : ", ") + column.name;
  return text;
}

}  // namespace

std::string_view source_kind_name(SourceKind kind) noexcept {
  switch (kind) {
    case SourceKind::dialogue:
      return "dialogue";
    case SourceKind::embeddings:
      return "embeddings";
    case SourceKind::llm_cache:
      return "llm-cache";
  }
  return "unknown";
}

std::optional<SourceKind> parse_source_kind(std::string_view name) noexcept {
  if (name == "dialogue") return SourceKind::dialogue;
  if (name == "embeddings") return SourceKind::embeddings;
  if (name == "llm-cache" || name == "llm_cache") return SourceKind::llm_cache;
  return std::nullopt;
}

FieldSpec parse_field_spec(std::string_view text) {
  const auto equals = text.find('=');
  if (equals == std::string_view::npos)
    throw UsageError("--field '" + std::string(text) + "': expected COLUMN=PATH");
  FieldSpec field{std::string(text.substr(0, equals)), std::string(text.substr(equals + 1))};
  if (!valid_column_name(field.column))
    throw UsageError("--field '" + std::string(text) + "': column name '" + field.column +
                     "' must match [a-z_][a-z0-9_]* (at most 64 characters)");
  detail::parse_path(field.path);  // throws UsageError with the column of the mistake
  return field;
}

std::string format_field_flag(const FieldSpec& field) {
  return "--field " + shell_quote(field.column + "=" + field.path);
}

std::string format_flags(SourceKind kind, const std::vector<FieldSpec>& fields) {
  std::string text = "--kind " + std::string(source_kind_name(kind));
  for (const auto& field : fields) {
    text += ' ';  // piecewise: " " + std::string trips GCC 12's -Wrestrict false positive
    text += format_field_flag(field);
  }
  return text;
}

const InputColumn* SourceMapping::find(std::string_view column) const noexcept {
  for (const auto& candidate : columns)
    if (candidate.name == column) return &candidate;
  return nullptr;
}

SourceMapping map_source(const Value& root, const std::string& origin,
                         std::optional<SourceKind> kind, const std::vector<FieldSpec>& fields) {
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (!valid_column_name(fields[i].column))
      throw UsageError("--field column name '" + fields[i].column +
                       "' must match [a-z_][a-z0-9_]*");
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
  } else {
    throw *detection_error;
  }
  const auto standards = standard_columns(final_kind);

  // Explicit fields first; detection fills in the standard columns they leave out.
  std::vector<FieldSpec> plan = fields;
  const bool detection_fits = detected && interchangeable(detected->kind, final_kind);
  bool used_detection = false;
  if (detection_fits) {
    for (const auto& field : detected->fields) {
      if (find_standard(standards, field.column) && !has_column(plan, field.column)) {
        plan.push_back(field);
        used_detection = true;
      }
    }
  }
  std::string missing;
  for (const auto& standard : standards) {
    if (standard.required && !has_column(plan, standard.name))
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
      if (field.column == standard.name) ordered.push_back(field);
  }
  for (const auto& field : plan)
    if (!find_standard(standards, field.column)) ordered.push_back(field);

  SourceMapping mapping;
  mapping.kind = final_kind;
  mapping.origin = origin;
  for (const auto& field : ordered) {
    mapping.columns.push_back(detail::build_column(root, origin, field));
    const InputColumn& column = mapping.columns.back();
    if (const auto* standard = find_standard(standards, column.name))
      check_column_type(column, *standard);
    mapping.fields.push_back({column.name, column.path});
  }

  mapping.rows = mapping.columns.front().rows;
  const bool rows_agree =
      std::all_of(mapping.columns.begin(), mapping.columns.end(),
                  [&](const InputColumn& column) { return column.rows == mapping.rows; });
  if (!rows_agree) {
    std::string counts;
    for (const auto& column : mapping.columns)
      counts += "\n  " + column.name + ": " + std::to_string(column.rows) + " rows (path '" +
                column.path + "')";
    throw Error(origin, "layout", "columns disagree on the number of rows:" + counts);
  }
  if (mapping.rows == 0) throw Error(origin, "layout", "the columns have no rows");

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

void check_compatible(const std::vector<SourceMapping>& mappings) {
  if (mappings.size() < 2) return;
  auto listing = [&](auto&& describe) {
    std::string text;
    for (const auto& mapping : mappings) text += "\n  " + mapping.origin + ": " + describe(mapping);
    return text;
  };
  const auto& first = mappings.front();
  for (const auto& mapping : mappings) {
    if (mapping.kind != first.kind)
      throw Error("", "inputs", "are not all of one kind:" + listing([](const SourceMapping& m) {
                                  return std::string(source_kind_name(m.kind));
                                }));
  }
  auto sorted_names = [](const SourceMapping& mapping) {
    std::vector<std::string> names;
    for (const auto& column : mapping.columns) names.push_back(column.name);
    std::sort(names.begin(), names.end());
    return names;
  };
  for (const auto& mapping : mappings) {
    if (sorted_names(mapping) != sorted_names(first))
      throw Error("", "inputs", "do not have the same columns:" + listing(column_names));
  }
  for (const auto& column : first.columns) {
    auto describe = [&](const SourceMapping& mapping) {
      const InputColumn& other = *mapping.find(column.name);
      if (other.kind == ColumnKind::text) return std::string("text");
      return std::string(dtype_name(other.dtype)) + " dim " + std::to_string(other.dim());
    };
    for (const auto& mapping : mappings) {
      const InputColumn& other = *mapping.find(column.name);
      const bool same_kind = other.kind == column.kind;
      const bool same_dim = other.dim() == column.dim();
      const bool both_float =
          detail::widens_to_f32(other.dtype) && detail::widens_to_f32(column.dtype);
      const bool same_dtype =
          column.kind == ColumnKind::text || other.dtype == column.dtype || both_float;
      if (!same_kind || !same_dim || !same_dtype)
        throw Error("", "inputs",
                    "disagree on column " + column.name + " (" +
                        (!same_kind  ? "text vs numbers"
                         : !same_dim ? "dims differ"
                                     : "dtypes differ") +
                        "):" + listing(describe));
    }
  }
}

}  // namespace gpucache
