// map_input: a tree goes to map_source; columns an array reader hands over (or that come from
// memory) are selected by --field, named, and given roles here, by the same rules map_source
// applies to a tree.
#include <algorithm>
#include <memory>
#include <string_view>

#include "gpucache/common/float_convert.hpp"
#include "gpucache/error.hpp"
#include "gpucache/schema.hpp"

namespace gpucache {
namespace {

// How an input names a column: the reader's path ("/train" in HDF5), or the name it gave it.
bool names(const InputColumn& column, std::string_view path) {
  auto bare = [](std::string_view text) {
    while (!text.empty() && text.front() == '/') text.remove_prefix(1);
    return text;
  };
  return bare(column.path) == bare(path) || column.name == bare(path);
}

// "; left out: when (INT96 timestamps), ..." or nothing.
std::string left_out_text(const std::vector<LeftOutField>& left_out) {
  std::string text;
  for (const auto& entry : left_out)
    text += (text.empty() ? "; left out: " : ", ") + left_out_entry(entry);
  return text;
}

std::string available(const std::vector<InputColumn>& columns) {
  std::string text;
  for (const auto& column : columns) {
    text += (text.empty() ? "" : ", ") + column.path + " (";
    text += column.kind == ColumnKind::text ? std::string("text")
                                            : std::string(dtype_name(column.dtype));
    if (column.kind == ColumnKind::tensor) {
      text += " [" + std::to_string(column.rows);
      for (std::uint64_t extent : column.row_shape) text += ", " + std::to_string(extent);
      text += "]";
    }
    text += ")";
  }
  return text;
}

// The role's needs, for a column handed over as it is: what map_source's builder does for trees.
void give_role(InputColumn& column, ColumnRole role) {
  const std::string where = "column " + column.name + " (path '" + column.path + "')";
  switch (role) {
    case ColumnRole::embedding: {
      if (column.kind != ColumnKind::tensor || !detail::widens_to_f32(column.dtype))
        throw Error(column.origin, where,
                    "has dtype " + std::string(dtype_name(column.dtype)) +
                        "; embeddings must be f16, bf16, f32 or f64 vectors");
      std::vector<std::uint64_t> vector;
      for (std::uint64_t extent : column.row_shape)
        if (extent != 1) vector.push_back(extent);
      if (vector.size() > 1)
        throw Error(column.origin, where,
                    "has rows of several dimensions; an embedding row is one vector (use --role " +
                        column.name + "=tensor)");
      // Dimensions of 1 are dropped: the rows' values and their order stay the same.
      column.row_shape = {vector.empty() ? 1 : vector.front()};
      column.padded_dim = column.row_shape.front();
      break;
    }
    case ColumnRole::tensor:
      if (column.kind != ColumnKind::tensor)
        throw Error(column.origin, where,
                    "holds " + std::string(column_kind_name(column.kind)) + ", not a tensor");
      break;
    case ColumnRole::sequence:
      if (column.kind == ColumnKind::tensor && column.row_shape.size() <= 1 && column.read_rows) {
        // Rows of one length read as sequences of that length.
        const std::uint64_t length = column.dim();
        const std::size_t itemsize = dtype_size(column.dtype);
        auto read_rows = column.read_rows;
        column.kind = ColumnKind::sequence;
        column.row_shape.clear();
        column.padded_dim = 0;
        column.row_length = [length](std::uint64_t) { return length; };
        column.read_sequence = [read_rows, length, itemsize](std::uint64_t row,
                                                             std::span<std::byte> out) {
          read_rows(row, 1, out.first(length * itemsize));
        };
      } else if (column.kind != ColumnKind::sequence) {
        throw Error(column.origin, where, "does not hold 1-D rows to read as sequences");
      }
      break;
    case ColumnRole::text:
      if (column.kind != ColumnKind::text)
        throw Error(column.origin, where, "must be text but holds numbers");
      break;
  }
  column.role = role;
}

bool is_vector_column(const InputColumn& column) {
  return column.kind == ColumnKind::tensor && detail::widens_to_f32(column.dtype) &&
         column.row_shape.size() == 1;
}

SourceMapping map_columns(const std::vector<InputColumn>& columns, const std::string& origin,
                          std::optional<SourceKind> kind, const std::vector<FieldSpec>& fields,
                          const std::vector<RoleSpec>& roles,
                          const std::vector<LeftOutField>& left_out) {
  SourceMapping mapping;
  mapping.origin = origin;
  std::vector<std::pair<InputColumn, std::optional<ColumnRole>>> chosen;
  if (!fields.empty()) {
    for (const auto& field : fields) {
      const auto found = std::find_if(columns.begin(), columns.end(),
                                      [&](const InputColumn& c) { return names(c, field.path); });
      if (found == columns.end())
        throw Error(origin, "--field " + field.column,
                    "no array '" + field.path + "'; the input holds " + available(columns) +
                        left_out_text(left_out));
      InputColumn column = *found;
      column.name = field.column;
      chosen.emplace_back(std::move(column), std::nullopt);
    }
    const bool dialogue = std::any_of(fields.begin(), fields.end(), [](const FieldSpec& f) {
      return layout_role(SourceKind::dialogue, f.column) == ColumnRole::embedding;
    });
    const bool embeddings = std::any_of(fields.begin(), fields.end(), [](const FieldSpec& f) {
      return layout_role(SourceKind::embeddings, f.column) == ColumnRole::embedding;
    });
    mapping.kind = kind         ? *kind
                   : dialogue   ? SourceKind::dialogue
                   : embeddings ? SourceKind::embeddings
                                : SourceKind::tensors;
    // A column --field names as a standard embedding column takes that role (the one rule,
    // layout_role), whatever --kind labels the input.
    for (auto& [column, role] : chosen)
      if (layout_role(SourceKind::dialogue, column.name) == ColumnRole::embedding ||
          layout_role(SourceKind::embeddings, column.name) == ColumnRole::embedding)
        role = ColumnRole::embedding;
    mapping.explanation = "Columns chosen with --field from the arrays the input holds.";
  } else {
    // One float vector column is an embedding dataset, the others its extra columns; anything
    // else is a tensor dataset of every array.
    std::vector<std::size_t> vectors;
    for (std::size_t c = 0; c < columns.size(); ++c)
      if (is_vector_column(columns[c])) vectors.push_back(c);
    const bool embeddings = kind != SourceKind::tensors && vectors.size() == 1;
    mapping.kind = embeddings ? SourceKind::embeddings : SourceKind::tensors;
    if (kind && *kind != mapping.kind && *kind != SourceKind::llm_cache)
      throw Error(origin, "layout",
                  "--kind " + std::string(source_kind_name(*kind)) +
                      " needs its columns named with --field; the input holds " +
                      available(columns));
    for (std::size_t c = 0; c < columns.size(); ++c) {
      InputColumn column = columns[c];
      // The lone float vector array fills the layout's `embedding` column under its own name
      // (names are the user's: a `features` column stays `features`, and takes the embedding's
      // role by layout_role; --role features=tensor makes it a tensor).
      const bool embedding = embeddings && c == vectors.front();
      chosen.emplace_back(std::move(column),
                          embedding ? layout_role(mapping.kind, "embedding") : std::nullopt);
    }
    // The embedding column first, as map_source orders standard columns.
    if (embeddings)
      std::rotate(chosen.begin(), chosen.begin() + vectors.front(),
                  chosen.begin() + vectors.front() + 1);
    mapping.explanation = embeddings ? "One vector array is the embedding (under its own name); "
                                       "the others are extra columns."
                                     : "Every array is a column.";
  }
  for (const auto& role : roles) {
    const auto it = std::find_if(chosen.begin(), chosen.end(),
                                 [&](const auto& c) { return c.first.name == role.column; });
    if (it == chosen.end())
      throw UsageError("--role names column '" + role.column + "', which " + origin +
                       " does not map");
    it->second = role.role;
  }
  for (auto& [column, role] : chosen) {
    if (role) give_role(column, *role);
    mapping.fields.push_back({column.name, column.path, ""});
    mapping.columns.push_back(std::move(column));
  }
  if (mapping.columns.empty()) throw Error(origin, "layout", "the input holds no arrays");
  mapping.left_out = left_out;
  for (const auto& column : columns)
    if (std::none_of(mapping.columns.begin(), mapping.columns.end(),
                     [&](const InputColumn& chosen) { return chosen.path == column.path; }))
      mapping.not_selected.push_back(column.path);
  mapping.rows = mapping.columns.front().rows;
  for (const auto& column : mapping.columns)
    if (column.rows != mapping.rows)
      throw Error(origin, "layout",
                  "the arrays disagree on the number of rows (" + available(columns) +
                      "); choose arrays of one length with --field");
  if (mapping.rows == 0) throw Error(origin, "layout", "the columns have no rows");
  note_renamed_columns(mapping, fields, false);
  return mapping;
}

}  // namespace

InputColumn constant_text_column(const std::string& column, const std::string& text,
                                 std::uint64_t rows, const std::string& origin) {
  InputColumn filled;
  filled.name = column;
  filled.kind = ColumnKind::text;
  filled.dtype = DType::u8;
  filled.role = ColumnRole::text;
  filled.rows = rows;
  filled.path = "fill:" + column;
  filled.origin = origin;
  auto shared = std::make_shared<const std::string>(text);
  filled.text_row = [shared](std::uint64_t) { return std::string_view(*shared); };
  return filled;
}

SourceMapping map_input(const InputData& data, const std::string& origin,
                        std::optional<SourceKind> kind, const std::vector<FieldSpec>& fields,
                        const std::vector<RoleSpec>& roles) {
  if (!data.columnar()) return map_source(data.tree, origin, kind, fields, roles);
  const bool take_defaults =
      fields.empty() && !data.default_fields.empty() && (!kind || *kind == SourceKind::embeddings);
  if (!take_defaults) return map_columns(data.columns, origin, kind, fields, roles, data.left_out);
  // A layout the reader recognised (ann-benchmarks HDF5): its columns, as if --field named them.
  std::vector<FieldSpec> defaults;
  for (const auto& field : data.default_fields) defaults.push_back({field.column, field.path, ""});
  SourceMapping mapping = map_columns(data.columns, origin, kind, defaults, roles, data.left_out);
  mapping.explanation = data.layout_explanation;
  return mapping;
}

}  // namespace gpucache
