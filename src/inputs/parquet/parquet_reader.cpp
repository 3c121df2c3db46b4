// A Parquet file as input columns (FORMAT.md beside this file): the footer is parsed, each
// top-level field mapped to one leaf column, and every (field, row group) chunk decoded in
// parallel. Tensor columns keep one buffer per row group and hand rows over where they lie
// (direct_rows within a row group, row_pointers across them); text and sequence columns are
// joined into one buffer each.
#include <algorithm>
#include <cstring>
#include <memory>

#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/error_text.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/common/parallel.hpp"
#include "gpucache/error.hpp"
#include "gpucache/parquet.hpp"
#include "parquet_chunk.hpp"
#include "parquet_metadata.hpp"
#include "parquet_time.hpp"

namespace gpucache {
namespace detail::parquet {
namespace {

constexpr std::string_view kMagic("PAR1", 4);
constexpr std::string_view kEncryptedMagic("PARE", 4);
// A field nested deeper than this below the root is left out; the tree itself may be deeper,
// up to kMaxTreeDepth (beyond it the file is refused: the walk is recursive).
constexpr int kMaxSchemaDepth = 32;
constexpr int kMaxTreeDepth = 1024;

// A schema element and its children, from the depth-first list.
struct SchemaNode {
  const SchemaElement* element = nullptr;
  std::vector<SchemaNode> children;
};

SchemaNode build_tree(const std::vector<SchemaElement>& schema, std::size_t& next, int depth,
                      const std::string& origin) {
  if (depth > kMaxTreeDepth) throw Error(origin, "schema", "nested too deeply");
  if (next >= schema.size()) throw Error(origin, "schema", "ends before its children do");
  SchemaNode node{&schema[next++], {}};
  const std::int32_t children = node.element->num_children;
  if (children < 0 || static_cast<std::size_t>(children) > schema.size() - next)
    throw Error(origin, "schema",
                "'" + node.element->name + "' claims " + std::to_string(children) + " children");
  for (std::int32_t i = 0; i < children; ++i)
    node.children.push_back(build_tree(schema, next, depth + 1, origin));
  return node;
}

// Levels below `node` (0 for a leaf).
int depth_below(const SchemaNode& node) {
  int deepest = 0;
  for (const auto& child : node.children) deepest = std::max(deepest, 1 + depth_below(child));
  return deepest;
}

std::size_t count_leaves(const SchemaNode& node) {
  if (node.children.empty()) return 1;
  std::size_t leaves = 0;
  for (const auto& child : node.children) leaves += count_leaves(child);
  return leaves;
}

bool is_list(const SchemaElement& element) {
  return element.logical == Logical::list || element.converted == Converted::list;
}

Repetition repetition_of(const SchemaElement& element) {
  return element.repetition.value_or(Repetition::required);
}

// The gpucache dtype of a leaf, or why it has none.
struct LeafType {
  bool text = false;
  DType dtype = DType::u8;
  std::string refusal;
};

LeafType leaf_type(const SchemaElement& leaf) {
  using enum PhysicalType;
  const Logical logical = leaf.logical;
  const auto converted = leaf.converted;
  auto refuse = [](std::string why) { return LeafType{false, DType::u8, std::move(why)}; };
  const bool annotated_other =
      (logical != Logical::none && logical != Logical::integer && logical != Logical::string &&
       logical != Logical::float16 && logical != Logical::json && logical != Logical::enum_) ||
      (converted && logical == Logical::none &&
       !(*converted >= Converted::uint_8 && *converted <= Converted::int_64) &&
       *converted != Converted::utf8 && *converted != Converted::json &&
       *converted != Converted::enum_);
  if (annotated_other)
    return refuse("decimals, UUIDs, intervals and the like are not numbers gpucache stores");
  switch (*leaf.type) {
    case boolean:
      return {false, DType::boolean, ""};
    case float32:
      return {false, DType::f32, ""};
    case float64:
      return {false, DType::f64, ""};
    case int32:
    case int64: {
      int bits = *leaf.type == int32 ? 32 : 64;
      bool is_signed = true;
      if (logical == Logical::integer) {
        bits = leaf.integer_bits;
        is_signed = leaf.integer_signed;
      } else if (converted) {
        switch (*converted) {
          case Converted::int_8:
            bits = 8;
            break;
          case Converted::int_16:
            bits = 16;
            break;
          case Converted::int_32:
            bits = 32;
            break;
          case Converted::int_64:
            bits = 64;
            break;
          case Converted::uint_8:
            bits = 8;
            is_signed = false;
            break;
          case Converted::uint_16:
            bits = 16;
            is_signed = false;
            break;
          case Converted::uint_32:
            bits = 32;
            is_signed = false;
            break;
          case Converted::uint_64:
            bits = 64;
            is_signed = false;
            break;
          default:
            break;
        }
      }
      const bool fits = *leaf.type == int32 ? bits <= 32 : bits == 64;
      if (!fits) return refuse("an integer annotation that does not fit its physical type");
      switch (bits) {
        case 8:
          return {false, is_signed ? DType::i8 : DType::u8, ""};
        case 16:
          return {false, is_signed ? DType::i16 : DType::u16, ""};
        case 32:
          return {false, is_signed ? DType::i32 : DType::u32, ""};
        case 64:
          return {false, is_signed ? DType::i64 : DType::u64, ""};
        default:
          return refuse("a " + std::to_string(bits) + "-bit integer");
      }
    }
    case byte_array:
      if (logical == Logical::string || logical == Logical::json || logical == Logical::enum_ ||
          converted == Converted::utf8 || converted == Converted::json ||
          converted == Converted::enum_)
        return {true, DType::u8, ""};
      return refuse("binary values (not annotated as strings)");
    case fixed_len_byte_array:
      if (logical == Logical::float16 && leaf.type_length == 2) return {false, DType::f16, ""};
      return refuse("fixed-length byte arrays other than float16");
    case int96:  // plan_field maps every INT96 through time_leaf
      break;
  }
  return refuse("an unknown physical type");
}

// What a top-level field maps to: a LeafColumn, or why it is left out.
struct FieldPlan {
  std::optional<LeafColumn> column;
  std::string refusal;
};

FieldPlan plan_field(const SchemaNode& field, std::size_t leaf_index) {
  FieldPlan plan;
  LeafColumn column;
  column.name = field.element->name;
  column.shown_name = detail::quoted(column.name, detail::kShownChars, '\'');
  column.leaf_index = leaf_index;
  // The nodes from the field down to its leaf, and at each the definition level it brings.
  std::vector<std::pair<const SchemaElement*, int>> path;
  int definition = 0;
  const SchemaNode* node = &field;
  auto step = [&](const SchemaNode& at) {
    const Repetition repetition = repetition_of(*at.element);
    if (repetition != Repetition::required) ++definition;
    if (repetition == Repetition::repeated) ++column.max_repetition;
    path.emplace_back(at.element, definition);
    column.path.push_back(at.element->name);
  };
  for (;;) {
    step(*node);
    if (node->children.empty()) break;
    const SchemaElement& element = *node->element;
    if (!is_list(element) || node->children.size() != 1) {
      plan.refusal = element.logical == Logical::map || element.converted == Converted::map ||
                             element.converted == Converted::map_key_value
                         ? "a map"
                         : "a struct";
      return plan;
    }
    // A LIST: its one child repeats; three levels (repeated group "list" { element }) unless
    // the repeated child is itself the element (two levels: repeated primitive, or a repeated
    // group of several fields).
    const SchemaNode& repeated = node->children[0];
    if (repetition_of(*repeated.element) != Repetition::repeated) {
      plan.refusal = "a LIST whose child does not repeat";
      return plan;
    }
    if (repeated.children.empty()) {
      node = &repeated;
      continue;
    }
    if (repeated.children.size() != 1) {
      plan.refusal = "a list of structs";
      return plan;
    }
    step(repeated);
    node = &repeated.children[0];
  }
  if (repetition_of(*field.element) == Repetition::repeated && !field.children.empty()) {
    plan.refusal = "a repeated group";
    return plan;
  }
  column.leaf = *node->element;
  if (!column.leaf.type) {
    plan.refusal = "a leaf without a type";
    return plan;
  }
  // Dates and times first (parquet_time.cpp): i64 values with their ColumnTime.
  if (auto time = time_leaf(column.leaf)) {
    if (!time->refusal.empty()) {
      plan.refusal = time->refusal;
      return plan;
    }
    column.time = time->time;
    column.time_conversion = time->conversion;
  }
  const LeafType type = column.time ? LeafType{false, DType::i64, ""} : leaf_type(column.leaf);
  if (!type.refusal.empty()) {
    plan.refusal = type.refusal;
    return plan;
  }
  if (type.text && column.max_repetition > 0) {
    plan.refusal = "lists of strings";
    return plan;
  }
  column.text = type.text;
  column.dtype = type.dtype;
  column.max_definition = definition;
  // An entry whose definition level is d stops at the first node that needs more than d: a
  // repeated node there is an empty list, an optional one a null.
  column.below_max.resize(static_cast<std::size_t>(definition));
  for (int level = 0; level < definition; ++level) {
    int list_depth = 0;
    for (const auto& [element, needs] : path) {
      const bool repeated = repetition_of(*element) == Repetition::repeated;
      if (repeated) ++list_depth;
      if (needs > level) {
        column.below_max[level] = {!repeated, repeated ? list_depth : 0, list_depth};
        break;
      }
    }
  }
  plan.column = std::move(column);
  return plan;
}

// The decoded chunks of one column, one per row group, and where each starts.
struct ColumnChunks {
  std::vector<DecodedChunk> groups;
  std::vector<std::uint64_t> first_rows;  // groups.size() + 1
  std::uint64_t row_bytes = 0;

  std::size_t group_of(std::uint64_t row) const {
    return static_cast<std::size_t>(std::upper_bound(first_rows.begin(), first_rows.end(), row) -
                                    first_rows.begin() - 1);
  }
};

void wire_tensor(InputColumn& column, std::shared_ptr<const ColumnChunks> chunks) {
  column.read_rows = [chunks](std::uint64_t first, std::uint64_t count, std::span<std::byte> out) {
    std::byte* to = out.data();
    while (count > 0) {
      const std::size_t g = chunks->group_of(first);
      const std::uint64_t in_group = first - chunks->first_rows[g];
      const std::uint64_t n = std::min(count, chunks->first_rows[g + 1] - first);
      std::memcpy(to, chunks->groups[g].values.get() + in_group * chunks->row_bytes,
                  n * chunks->row_bytes);
      to += n * chunks->row_bytes;
      first += n;
      count -= n;
    }
  };
  column.direct_rows = [chunks](std::uint64_t first, std::uint64_t count) -> const std::byte* {
    if (count == 0 || first >= chunks->first_rows.back()) return nullptr;
    const std::size_t g = chunks->group_of(first);
    if (count > chunks->first_rows[g + 1] - first) return nullptr;
    return chunks->groups[g].values.get() + (first - chunks->first_rows[g]) * chunks->row_bytes;
  };
  column.row_pointers = [chunks](std::uint64_t first, std::uint64_t count, const std::byte** out) {
    while (count > 0) {
      const std::size_t g = chunks->group_of(first);
      const std::byte* at =
          chunks->groups[g].values.get() + (first - chunks->first_rows[g]) * chunks->row_bytes;
      const std::uint64_t n = std::min(count, chunks->first_rows[g + 1] - first);
      for (std::uint64_t r = 0; r < n; ++r) *out++ = at + r * chunks->row_bytes;
      first += n;
      count -= n;
    }
    return true;
  };
}

// Text and sequences: every row group's values joined, with rows + 1 offsets (in elements).
struct Joined {
  std::vector<std::byte> values;
  std::vector<std::uint64_t> offsets{0};
};

std::shared_ptr<const Joined> join_text(std::vector<DecodedChunk>& groups) {
  auto joined = std::make_shared<Joined>();
  if (groups.size() == 1) {  // one row group: its bytes and offsets as they are
    joined->values = std::move(groups[0].text);
    joined->offsets = std::move(groups[0].text_offsets);
    return joined;
  }
  for (auto& group : groups) {
    const std::uint64_t base = joined->values.size();
    joined->values.insert(joined->values.end(), group.text.begin(), group.text.end());
    for (std::size_t r = 1; r < group.text_offsets.size(); ++r)
      joined->offsets.push_back(base + group.text_offsets[r]);
    group = {};
  }
  return joined;
}

std::shared_ptr<const Joined> join_sequences(std::vector<DecodedChunk>& groups, std::size_t size) {
  auto joined = std::make_shared<Joined>();
  for (auto& group : groups) {
    joined->values.insert(joined->values.end(), group.values.get(),
                          group.values.get() + group.value_count * size);
    for (std::uint64_t length : group.row_lengths)
      joined->offsets.push_back(joined->offsets.back() + length);
    group = {};
  }
  return joined;
}

InputColumn make_column(const LeafColumn& leaf, std::vector<DecodedChunk> groups,
                        const std::string& origin, std::string& refusal) {
  InputColumn column;
  column.name = column_name_from_path(leaf.name);
  column.path = leaf.name;
  column.origin = origin;
  column.dtype = leaf.dtype;
  column.time = leaf.time;
  for (const auto& group : groups)
    if (!group.left_out.empty()) {
      refusal = group.left_out;
      return column;
    }
  for (const auto& group : groups) {
    // Null rows (columns without lists), numbered from the file's first row.
    for (const std::uint64_t row : group.null_rows) column.null_rows.push_back(column.rows + row);
    column.rows += group.rows;
  }
  const std::size_t size = dtype_size(leaf.dtype);
  if (leaf.text) {
    column.kind = ColumnKind::text;
    column.role = ColumnRole::text;
    auto joined = join_text(groups);
    column.text_row = [joined](std::uint64_t row) {
      const auto begin = joined->offsets[row];
      return std::string_view(reinterpret_cast<const char*>(joined->values.data()) + begin,
                              joined->offsets[row + 1] - begin);
    };
    return column;
  }
  // Lists: a tensor when every list at every depth has one length, in every row group.
  std::vector<std::int64_t> uniform(static_cast<std::size_t>(leaf.max_repetition),
                                    DecodedChunk::kNoList);
  for (const auto& group : groups)
    for (std::size_t d = 0; d < uniform.size(); ++d) {
      const std::int64_t length = group.uniform_lengths[d];
      if (length == DecodedChunk::kNoList) continue;
      if (uniform[d] == DecodedChunk::kNoList)
        uniform[d] = length;
      else if (uniform[d] != length)
        uniform[d] = DecodedChunk::kVaried;
    }
  const bool tensor =
      std::all_of(uniform.begin(), uniform.end(), [](std::int64_t length) { return length > 0; });
  if (!tensor && leaf.max_repetition > 1) {
    refusal = "nested lists whose lengths vary or that are empty";
    return column;
  }
  if (!tensor && leaf.time) {
    // A sequence column has no time metadata (the manifest records it for i64 tensors).
    refusal = "lists of dates or times whose lengths vary";
    return column;
  }
  if (!tensor) {
    column.kind = ColumnKind::sequence;
    column.role = ColumnRole::sequence;
    column.padded_dim = 0;
    auto joined = join_sequences(groups, size);
    column.row_length = [joined](std::uint64_t row) {
      return joined->offsets[row + 1] - joined->offsets[row];
    };
    column.read_sequence = [joined, size](std::uint64_t row, std::span<std::byte> out) {
      if (out.empty()) return;  // an empty row: `out` may have no storage at all
      std::memcpy(out.data(), joined->values.data() + joined->offsets[row] * size, out.size());
    };
    return column;
  }
  std::uint64_t elements = 1;
  for (std::int64_t length : uniform) {
    column.row_shape.push_back(static_cast<std::uint64_t>(length));
    elements *= static_cast<std::uint64_t>(length);
  }
  column.padded_dim = column.row_shape.empty() ? 1 : column.row_shape.back();
  auto chunks = std::make_shared<ColumnChunks>();
  chunks->row_bytes = elements * size;
  chunks->first_rows.push_back(0);
  for (auto& group : groups) {
    // A list column's null rows have no values in the chunk: each gets a row of zeros in its
    // place (the values move once; a column without lists has its placeholders already).
    if (leaf.max_repetition > 0 && !group.null_rows.empty()) {
      const std::uint64_t row_bytes = chunks->row_bytes;
      ValueBuffer spread(group.rows * row_bytes);
      std::size_t next_null = 0;
      std::uint64_t from = 0;
      for (std::uint64_t row = 0; row < group.rows; ++row) {
        std::byte* to = spread.get() + row * row_bytes;
        if (next_null < group.null_rows.size() && group.null_rows[next_null] == row) {
          std::memset(to, 0, row_bytes);
          ++next_null;
        } else {
          std::memcpy(to, group.values.get() + from * row_bytes, row_bytes);
          ++from;
        }
      }
      group.values = std::move(spread);
    }
    chunks->first_rows.push_back(chunks->first_rows.back() + group.rows);
    chunks->groups.push_back(std::move(group));
  }
  wire_tensor(column, std::move(chunks));
  return column;
}

// A column without lists as the footer describes it, for a reader asked for metadata only
// (ReadOptions::tensor_data = false: probe): nothing is decoded, and reading a row is an error.
InputColumn describe_column(const LeafColumn& leaf, std::uint64_t rows, const std::string& origin) {
  InputColumn column;
  column.name = column_name_from_path(leaf.name);
  column.path = leaf.name;
  column.origin = origin;
  column.dtype = leaf.dtype;
  column.time = leaf.time;
  column.rows = rows;
  const std::string where = "column " + leaf.shown_name;
  auto unread = [origin, where]() {
    return Error(origin, where, "was opened for its description only; its values were not read");
  };
  if (leaf.text) {
    column.kind = ColumnKind::text;
    column.role = ColumnRole::text;
    column.text_row = [unread](std::uint64_t) -> std::string_view { throw unread(); };
    return column;
  }
  column.read_rows = [unread](std::uint64_t, std::uint64_t, std::span<std::byte>) {
    throw unread();
  };
  return column;
}

FileMetadata read_footer(const detail::MappedFile& file, std::uint64_t& data_end) {
  const std::string& origin = file.path();
  const auto bytes = file.bytes();
  auto view = [&](std::uint64_t at, std::size_t n) {
    return std::string_view(reinterpret_cast<const char*>(bytes.data()) + at, n);
  };
  if (bytes.size() < 12 || (view(0, 4) != kMagic && view(0, 4) != kEncryptedMagic))
    throw Error(origin, "", "not a Parquet file (no PAR1 magic at its start)");
  const std::string_view tail = view(bytes.size() - 4, 4);
  if (tail == kEncryptedMagic || view(0, 4) == kEncryptedMagic)
    throw Error(origin, "", "an encrypted Parquet file, which gpucache cannot read");
  if (tail != kMagic)
    throw Error(origin, "byte " + std::to_string(bytes.size() - 4),
                "no PAR1 magic at the end: the file is truncated or not Parquet");
  std::uint32_t footer_length = 0;
  std::memcpy(&footer_length, bytes.data() + bytes.size() - 8, 4);
  if (footer_length > bytes.size() - 12)
    throw Error(
        origin, "byte " + std::to_string(bytes.size() - 8),
        "its footer claims " + std::to_string(footer_length) + " bytes, more than the file holds");
  data_end = bytes.size() - 8 - footer_length;
  FileMetadata metadata =
      parse_file_metadata(bytes.subspan(data_end, footer_length), origin, data_end);
  if (metadata.encrypted)
    throw Error(origin, "footer", "an encrypted Parquet file, which gpucache cannot read");
  if (metadata.schema.empty()) throw Error(origin, "footer", "has no schema");
  return metadata;
}

}  // namespace
}  // namespace detail::parquet

InputData read_parquet(const std::string& path, const ReadOptions& options) {
  using namespace detail::parquet;
  const auto file = detail::MappedFile::open(path);
  std::uint64_t data_end = 0;
  const FileMetadata metadata = read_footer(*file, data_end);
  std::size_t next = 0;
  const SchemaNode root = build_tree(metadata.schema, next, 0, path);
  if (next != metadata.schema.size())
    throw Error(path, "schema", "holds elements outside its root");
  const std::size_t leaves = count_leaves(root);

  std::vector<LeafColumn> columns;
  std::vector<LeftOutField> left_out;  // {"when", "dates, times, ..."}
  std::size_t leaf_index = 0;
  for (const auto& field : root.children) {
    const std::size_t field_leaves = count_leaves(field);
    if (depth_below(field) >= kMaxSchemaDepth) {
      // Too deep to read, not too deep to skip: the field is left out, the file read.
      left_out.push_back({field.element->name,
                          "nested more than " + std::to_string(kMaxSchemaDepth) + " levels deep"});
      leaf_index += field_leaves;
      continue;
    }
    FieldPlan plan = plan_field(field, leaf_index);
    leaf_index += field_leaves;
    if (plan.column)
      columns.push_back(std::move(*plan.column));
    else
      left_out.push_back({field.element->name, plan.refusal});
  }

  std::int64_t total_rows = 0;
  for (std::size_t g = 0; g < metadata.row_groups.size(); ++g) {
    const RowGroup& group = metadata.row_groups[g];
    if (group.columns.size() != leaves)
      throw Error(path, "row group " + std::to_string(g),
                  "has " + std::to_string(group.columns.size()) + " column chunks for " +
                      std::to_string(leaves) + " leaf columns");
    if (group.num_rows < 0 || group.num_rows > INT64_MAX - total_rows)
      throw Error(path, "row group " + std::to_string(g),
                  "claims a negative or impossible row count");
    total_rows += group.num_rows;
    for (const auto& column : columns) {
      const ColumnChunk& chunk = group.columns[column.leaf_index];
      if (chunk.encrypted)
        throw Error(path, "column '" + column.name + "'",
                    "is encrypted, which gpucache cannot read");
      if (!chunk.metadata)
        throw Error(path, "column '" + column.name + "' row group " + std::to_string(g),
                    "has no column metadata");
    }
  }

  // The footer's own num_rows is not checked against the row groups' total: pyarrow reads by the
  // row groups, and parquet-testing's repeated_no_annotation says 0 rows over a row group of 6.

  // Every (column, row group) chunk, decoded in parallel. A bad file fails with the error of its
  // first bad chunk in file order, whatever the threads: each task keeps its own.
  const std::size_t groups = metadata.row_groups.size();
  std::vector<std::uint64_t> first_rows(groups, 0);
  for (std::size_t g = 1; g < groups; ++g)
    first_rows[g] =
        first_rows[g - 1] + static_cast<std::uint64_t>(metadata.row_groups[g - 1].num_rows);
  std::vector<std::exception_ptr> failures(columns.size() * groups);
  std::vector<std::vector<DecodedChunk>> decoded(columns.size());
  for (auto& column : decoded) column.resize(groups);
  // Metadata only (probe): a column without lists is described by the footer alone; a list
  // column's levels are still decoded, since only they tell its kind and row shape.
  auto described = [&](std::size_t c) {
    return !options.tensor_data && columns[c].max_repetition == 0;
  };
  detail::parallel_for_each(columns.size() * groups, options.threads, [&](std::uint64_t task) {
    const std::size_t c = task / groups, g = task % groups;
    if (described(c)) return;
    const RowGroup& group = metadata.row_groups[g];
    try {
      decoded[c][g] =
          decode_chunk(file->bytes(), data_end, path, columns[c],
                       group.columns[columns[c].leaf_index], g, group.num_rows, first_rows[g]);
    } catch (...) {
      failures[g * columns.size() + c] = std::current_exception();
    }
  });
  for (const auto& failure : failures)
    if (failure) std::rethrow_exception(failure);

  InputData data;
  for (std::size_t c = 0; c < columns.size(); ++c) {
    std::string refusal;
    InputColumn column =
        described(c) ? describe_column(columns[c], static_cast<std::uint64_t>(total_rows), path)
                     : make_column(columns[c], std::move(decoded[c]), path, refusal);
    if (!refusal.empty())
      left_out.push_back({columns[c].name, refusal});
    else
      data.columns.push_back(std::move(column));
  }
  make_column_names_unique(data.columns);  // "a b" and "a_b" both make "a_b"
  if (data.columns.empty()) {
    std::string found;
    for (const auto& entry : left_out) found += (found.empty() ? "" : ", ") + left_out_entry(entry);
    throw Error(path, "",
                "holds no column gpucache can read" +
                    (found.empty() ? std::string() : " (found " + found + ")"));
  }
  data.left_out = std::move(left_out);
  return data;
}

}  // namespace gpucache
