// A Parquet file as input columns (FORMAT.md beside this file): the footer is parsed, each
// top-level field mapped to one leaf column, and every (field, row group) chunk decoded in
// parallel. Every column keeps one decoded chunk per row group within the resident budget and
// decodes the others again when read; tensor columns hand rows of kept row groups over where they
// lie (direct_rows within a row group, row_pointers across them).
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>

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
  LeafType(bool text_, DType dtype_, std::string refusal_, bool binary_ = false)
      : text(text_), dtype(dtype_), refusal(std::move(refusal_)), binary(binary_) {}
  bool text = false;
  DType dtype = DType::u8;
  std::string refusal;
  bool binary = false;     // LeafColumn::binary
  int decimal_scale = -1;  // LeafColumn::decimal_scale
  std::string conversion;  // LeafColumn::conversion
};

// Widest FIXED_LEN_BYTE_ARRAY decimal read: Arrow's decimal256 (76 digits, 32 bytes).
constexpr std::int32_t kMaxDecimalBytes = 32;

// DECIMAL (the LogicalType, or the ConvertedType with the element's own scale and precision):
// f64, the unscaled two's-complement integer divided by 10^scale; nullopt when the leaf is not
// a decimal. Left out when its annotation is not one a value can have.
std::optional<LeafType> decimal_type(const SchemaElement& leaf) {
  using enum PhysicalType;
  const bool decimal = leaf.logical == Logical::decimal ||
                       (leaf.logical == Logical::none && leaf.converted == Converted::decimal);
  if (!decimal) return std::nullopt;
  const std::int32_t precision = leaf.decimal_precision, scale = leaf.decimal_scale;
  const std::string name =
      "decimal(" + std::to_string(precision) + "," + std::to_string(scale) + ")";
  LeafType type{false, DType::f64, ""};
  if (precision < 1 || scale < 0 || scale > precision) {
    type.refusal = "a " + name + " annotation, which no decimal value can have";
    return type;
  }
  switch (*leaf.type) {
    case int32:
    case int64:
      break;
    case fixed_len_byte_array:
      if (leaf.type_length < 1 || leaf.type_length > kMaxDecimalBytes) {
        type.refusal = "a " + name + " of " + std::to_string(leaf.type_length) +
                       "-byte values (at most " + std::to_string(kMaxDecimalBytes) + " are read)";
        return type;
      }
      break;
    case byte_array:
      type.text = true;  // decoded as byte strings, converted once decoded
      type.binary = true;
      break;
    default:
      type.refusal = "a " + name + " annotation on a type that cannot hold one";
      return type;
  }
  type.decimal_scale = scale;
  type.conversion = name + " stored as f64";
  return type;
}

LeafType leaf_type(const SchemaElement& leaf) {
  using enum PhysicalType;
  const Logical logical = leaf.logical;
  const auto converted = leaf.converted;
  auto refuse = [](std::string why) { return LeafType{false, DType::u8, std::move(why)}; };
  if (auto decimal = decimal_type(leaf)) return *decimal;
  const bool annotated_other =
      (logical != Logical::none && logical != Logical::integer && logical != Logical::string &&
       logical != Logical::float16 && logical != Logical::json && logical != Logical::enum_) ||
      (converted && logical == Logical::none &&
       !(*converted >= Converted::uint_8 && *converted <= Converted::int_64) &&
       *converted != Converted::utf8 && *converted != Converted::json &&
       *converted != Converted::enum_);
  if (annotated_other)
    return refuse("UUIDs, intervals and the like are not numbers gpucache stores");
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
      // Arrow's `binary`: each value's bytes, unchecked, as a u8 sequence.
      if (logical == Logical::none && !converted) return {true, DType::u8, "", true};
      return refuse("binary values with an annotation gpucache does not read");
    case fixed_len_byte_array:
      if (logical == Logical::float16 && leaf.type_length == 2) return {false, DType::f16, ""};
      return refuse("fixed-length byte arrays other than float16");
    case int96:  // plan_field maps every INT96 through time_leaf
      break;
  }
  return refuse("an unknown physical type");
}

// What a field maps to: a LeafColumn, or why it is left out.
struct FieldPlan {
  std::optional<LeafColumn> column;
  std::string refusal;
};

bool is_map(const SchemaElement& element) {
  return element.logical == Logical::map || element.converted == Converted::map ||
         element.converted == Converted::map_key_value;
}

// A group that is flattened into one column per field: not a LIST or MAP, and not repeated.
bool is_struct(const SchemaNode& node) {
  return !node.children.empty() && !is_list(*node.element) && !is_map(*node.element) &&
         repetition_of(*node.element) != Repetition::repeated;
}

// `field`, below the structs `above` (from the top-level field down), named `name` ("a.b.c").
FieldPlan plan_field(const SchemaNode& field, const std::vector<const SchemaNode*>& above,
                     const std::string& name, std::size_t leaf_index) {
  FieldPlan plan;
  LeafColumn column;
  column.name = name;
  column.shown_name = detail::quoted(column.name, detail::kShownChars, '\'');
  column.leaf_index = leaf_index;
  // The nodes from the top-level field down to the leaf, and at each the definition level it
  // brings.
  std::vector<std::pair<const SchemaElement*, int>> path;
  int definition = 0;
  auto step = [&](const SchemaNode& at) {
    const Repetition repetition = repetition_of(*at.element);
    if (repetition != Repetition::required) ++definition;
    if (repetition == Repetition::repeated) ++column.max_repetition;
    path.emplace_back(at.element, definition);
    column.path.push_back(at.element->name);
  };
  for (const SchemaNode* parent : above) step(*parent);
  const SchemaNode* node = &field;
  for (;;) {
    step(*node);
    if (node->children.empty()) break;
    const SchemaElement& element = *node->element;
    if (!is_list(element) || node->children.size() != 1) {
      plan.refusal = is_map(element)                                  ? "a map"
                     : column.max_repetition > 0 && node != &field    ? "a list of structs"
                     : repetition_of(element) == Repetition::repeated ? "a repeated group"
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
    plan.refusal = type.decimal_scale >= 0 ? "lists of BYTE_ARRAY decimals"
                   : type.binary           ? "lists of binary values"
                                           : "lists of strings";
    return plan;
  }
  column.text = type.text;
  column.dtype = type.dtype;
  column.binary = type.binary;
  column.decimal_scale = type.decimal_scale;
  column.conversion = type.conversion;
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

// A top-level field's columns: one, or for a struct one per field below it (structs within it
// flattened too), named by their dotted path ("point.x"); what cannot be a column is left out
// with its reason, the struct's other fields kept. A null struct is a null in each of its
// columns. `leaf_index` is the field's first leaf's position in a row group.
void plan_fields(const SchemaNode& field, std::vector<const SchemaNode*>& above,
                 const std::string& name, std::size_t leaf_index, std::vector<LeafColumn>& columns,
                 std::vector<LeftOutField>& left_out) {
  if (!is_struct(field)) {
    FieldPlan plan = plan_field(field, above, name, leaf_index);
    if (plan.column)
      columns.push_back(std::move(*plan.column));
    else
      left_out.push_back({name, plan.refusal});
    return;
  }
  above.push_back(&field);
  for (const auto& child : field.children) {
    plan_fields(child, above, name + "." + child.element->name, leaf_index, columns, left_out);
    leaf_index += count_leaves(child);
  }
  above.pop_back();
}

// Decodes one (column, row group) chunk again, for a row group whose values were not kept
// (ResidentBudget); its list null rows spread as make_column spreads them.
using Redecode = std::function<DecodedChunk(std::size_t group)>;

// A list column's null rows have no values in the chunk: each gets a row of zeros in its place
// (the values move once; a column without lists has its placeholders already).
void spread_list_nulls(const LeafColumn& leaf, DecodedChunk& group, std::uint64_t row_bytes) {
  if (leaf.max_repetition == 0 || group.null_rows.empty()) return;
  own_values(group, (group.rows - group.null_rows.size()) * row_bytes);  // to move them together
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

struct ColumnChunks;

// What every Parquet file open in this process shares (one budget per process, so per pack):
// the decoded bytes kept resident, which a file reserves when it is opened and gives back when
// its last column goes, and the columns whose slot may hold a dropped row group decoded again,
// so that when reading moves to another file the slots of the others are emptied (a pack of N
// files holds one file's slots, not N). Lock order: `mutex`, then one column's slot_mutex; a
// column holds no slot_mutex while it calls in here.
struct OpenFiles {
  std::mutex mutex;
  std::uint64_t reserved = 0;  // bytes kept resident by the files open now
  std::uint64_t next_file = 1;
  std::atomic<std::uint64_t> reading{0};  // the file whose column last filled its slot
  std::vector<std::pair<std::uint64_t, std::weak_ptr<const ColumnChunks>>> columns;

  static OpenFiles& instance() {
    // Never destroyed: a column held by another static (a Python object alive at exit) gives its
    // reservation back after every static of this file would have gone.
    static OpenFiles* const files = new OpenFiles;
    return *files;
  }
  // Empties the slots of every other file's columns, once each time reading moves to `file`.
  void reading_moves_to(std::uint64_t file);
};

// A file's share of the resident budget, given back when the file's last column goes.
struct Reservation {
  std::uint64_t file = 0;
  std::uint64_t bytes = 0;
  Reservation() = default;
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  // Keeps `kept` of the bytes reserved (no more than reserved) and gives back the rest.
  void give_back_beyond(std::uint64_t kept) {
    OpenFiles& files = OpenFiles::instance();
    std::lock_guard lock(files.mutex);
    kept = std::min(kept, bytes);
    files.reserved -= bytes - kept;
    bytes = kept;
  }
  ~Reservation() {
    OpenFiles& files = OpenFiles::instance();
    std::lock_guard lock(files.mutex);
    files.reserved -= bytes;
  }
};

// The decoded chunks of one column, one per row group, and where each starts. A row group whose
// values were dropped after the open (not `resident`) is decoded again when read, into a slot
// that holds the last one so read: rows read in order cost one decode per row group. Tensor,
// text and sequence columns alike (a dropped text chunk keeps neither its bytes nor its offsets;
// a dropped sequence chunk keeps where each row's values start, which row_length answers from).
struct ColumnChunks {
  std::vector<DecodedChunk> groups;
  std::vector<char> resident;             // per group: its values are in groups[g]
  std::vector<std::uint64_t> first_rows;  // groups.size() + 1
  std::uint64_t row_bytes = 0;            // tensor columns: one row's bytes
  // Sequence columns: per group, where each of its rows + 1 starts, counting values.
  std::vector<std::vector<std::uint64_t>> starts;
  Redecode redecode;
  std::shared_ptr<const Reservation> reservation;  // the file's; its id names the file
  mutable std::mutex slot_mutex;
  mutable std::size_t slot_group = SIZE_MAX;
  mutable DecodedChunk slot;

  std::uint64_t file() const { return reservation ? reservation->file : 0; }
  void empty_slot() const {
    std::lock_guard lock(slot_mutex);
    slot = {};
    slot_group = SIZE_MAX;
  }

  std::size_t group_of(std::uint64_t row) const {
    return static_cast<std::size_t>(std::upper_bound(first_rows.begin(), first_rows.end(), row) -
                                    first_rows.begin() - 1);
  }
  // Calls use(chunk) with group g's decoded values: the kept chunk, or the slot (under its lock,
  // decoded again first when it holds another group).
  template <typename Use>
  void with_group(std::size_t g, Use&& use) const {
    if (resident[g]) {
      use(groups[g]);
      return;
    }
    if (OpenFiles::instance().reading.load(std::memory_order_relaxed) != file())
      OpenFiles::instance().reading_moves_to(file());
    std::lock_guard lock(slot_mutex);
    if (slot_group != g) {
      slot = {};  // the last one goes before the next is decoded: one at a time
      slot_group = SIZE_MAX;
      slot = redecode(g);
      slot_group = g;
    }
    use(slot);
  }
  // Copies n rows of a tensor column's group g from its row `in_group` on.
  void copy(std::size_t g, std::uint64_t in_group, std::uint64_t n, std::byte* to) const {
    with_group(g, [&](const DecodedChunk& chunk) {
      copy_values(chunk, in_group * row_bytes, n * row_bytes, to);
    });
  }
};

void OpenFiles::reading_moves_to(std::uint64_t file) {
  // The others' columns are held here while their slots are emptied, outside `mutex`: the last
  // hold on one may be this one, and its file's Reservation takes `mutex` as it goes.
  std::vector<std::shared_ptr<const ColumnChunks>> others;
  {
    std::lock_guard lock(mutex);
    if (reading.load() == file) return;
    reading.store(file);
    std::erase_if(columns, [](const auto& entry) { return entry.second.expired(); });
    for (const auto& [owner, weak] : columns)
      if (owner != file)
        if (auto chunks = weak.lock()) others.push_back(std::move(chunks));
  }
  for (const auto& chunks : others) chunks->empty_slot();
}

void wire_tensor(InputColumn& column, std::shared_ptr<const ColumnChunks> chunks) {
  column.read_rows = [chunks](std::uint64_t first, std::uint64_t count, std::span<std::byte> out) {
    std::byte* to = out.data();
    while (count > 0) {
      const std::size_t g = chunks->group_of(first);
      const std::uint64_t in_group = first - chunks->first_rows[g];
      const std::uint64_t n = std::min(count, chunks->first_rows[g + 1] - first);
      chunks->copy(g, in_group, n, to);
      to += n * chunks->row_bytes;
      first += n;
      count -= n;
    }
  };
  // Rows where they lie: only in row groups kept resident, whose values live as long as the
  // column (a re-decoded slot changes under its readers).
  column.direct_rows = [chunks](std::uint64_t first, std::uint64_t count) -> const std::byte* {
    if (count == 0 || first >= chunks->first_rows.back()) return nullptr;
    const std::size_t g = chunks->group_of(first);
    if (count > chunks->first_rows[g + 1] - first || !chunks->resident[g]) return nullptr;
    return values_at(chunks->groups[g], (first - chunks->first_rows[g]) * chunks->row_bytes,
                     count * chunks->row_bytes);
  };
  column.row_pointers = [chunks](std::uint64_t first, std::uint64_t count, const std::byte** out) {
    for (std::uint64_t row = first; row < first + count;) {
      const std::size_t g = chunks->group_of(row);
      if (!chunks->resident[g]) return false;
      row = chunks->first_rows[g + 1];
    }
    while (count > 0) {
      const std::size_t g = chunks->group_of(first);
      const DecodedChunk& chunk = chunks->groups[g];
      const std::uint64_t in_group = first - chunks->first_rows[g];
      const std::uint64_t n = std::min(count, chunks->first_rows[g + 1] - first);
      for (std::uint64_t r = 0; r < n; ++r) *out++ = row_at(chunk, in_group + r, chunks->row_bytes);
      first += n;
      count -= n;
    }
    return true;
  };
}

// Calls use(bytes) with a row of a text (or binary) column: its bytes where its row group's
// chunk holds them (in a dropped row group, the slot, under its lock).
template <typename Use>
void with_string_row(const ColumnChunks& chunks, std::uint64_t row, Use&& use) {
  const std::size_t g = chunks.group_of(row);
  const std::uint64_t in_group = row - chunks.first_rows[g];
  chunks.with_group(g, [&](const DecodedChunk& chunk) {
    const std::uint64_t begin = chunk.text_offsets[in_group];
    use(std::span(chunk.text).subspan(begin, chunk.text_offsets[in_group + 1] - begin));
  });
}

void wire_text(InputColumn& column, std::shared_ptr<const ColumnChunks> chunks) {
  // The view outlives the lock: in a dropped row group it stays valid until this column reads
  // a row of another dropped row group (InputColumn::text_row).
  column.text_row = [chunks](std::uint64_t row) {
    std::string_view text;
    with_string_row(*chunks, row, [&](std::span<const std::byte> bytes) {
      text = std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    });
    return text;
  };
}

// Arrow's binary: each row its bytes, a u8 sequence.
void wire_binary(InputColumn& column, std::shared_ptr<const ColumnChunks> chunks) {
  column.row_length = [chunks](std::uint64_t row) {
    std::uint64_t length = 0;
    with_string_row(*chunks, row, [&](std::span<const std::byte> bytes) { length = bytes.size(); });
    return length;
  };
  column.read_sequence = [chunks](std::uint64_t row, std::span<std::byte> out) {
    if (out.empty()) return;  // an empty row: `out` may have no storage at all
    with_string_row(*chunks, row, [&](std::span<const std::byte> bytes) {
      std::memcpy(out.data(), bytes.data(), out.size());
    });
  };
}

// A list column whose lengths vary: each row's length from the starts kept for every row group,
// its values from the chunk (decoded again when dropped).
void wire_sequence(InputColumn& column, std::shared_ptr<const ColumnChunks> chunks,
                   std::size_t size) {
  column.row_length = [chunks](std::uint64_t row) -> std::uint64_t {
    const std::size_t g = chunks->group_of(row);
    const auto& starts = chunks->starts[g];
    const std::uint64_t in_group = row - chunks->first_rows[g];
    return starts[in_group + 1] - starts[in_group];
  };
  column.read_sequence = [chunks, size](std::uint64_t row, std::span<std::byte> out) {
    if (out.empty()) return;  // an empty row: `out` may have no storage at all
    const std::size_t g = chunks->group_of(row);
    const std::uint64_t start = chunks->starts[g][row - chunks->first_rows[g]];
    chunks->with_group(g, [&](const DecodedChunk& chunk) {
      copy_values(chunk, start * size, out.size(), out.data());
    });
  };
}

InputColumn make_column(const LeafColumn& leaf, std::vector<DecodedChunk> groups,
                        std::vector<char> resident, Redecode redecode,
                        std::shared_ptr<const Reservation> reservation, const std::string& origin,
                        std::string& refusal) {
  InputColumn column;
  column.name = column_name_from_path(leaf.name);
  column.path = leaf.name;
  column.origin = origin;
  column.dtype = leaf.dtype;
  column.time = leaf.time;
  column.conversion = leaf.conversion;
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
  auto chunks = std::make_shared<ColumnChunks>();
  chunks->reservation = reservation;
  {
    OpenFiles& files = OpenFiles::instance();
    std::lock_guard lock(files.mutex);
    // Closed files' entries go here too, not only when reading moves: a weak_ptr holds its
    // column's allocation (make_shared) until it goes.
    std::erase_if(files.columns, [](const auto& entry) { return entry.second.expired(); });
    files.columns.emplace_back(reservation->file, chunks);
  }
  chunks->first_rows.push_back(0);
  for (const auto& group : groups)
    chunks->first_rows.push_back(chunks->first_rows.back() + group.rows);
  chunks->resident = std::move(resident);
  if (leaf.strings()) {
    chunks->groups = std::move(groups);
    chunks->redecode = std::move(redecode);
    if (leaf.binary) {  // Arrow's binary: each row its bytes, a u8 sequence
      column.kind = ColumnKind::sequence;
      column.role = ColumnRole::sequence;
      column.padded_dim = 0;
      wire_binary(column, std::move(chunks));
    } else {
      column.kind = ColumnKind::text;
      column.role = ColumnRole::text;
      wire_text(column, std::move(chunks));
    }
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
    for (auto& group : groups) {
      std::vector<std::uint64_t> starts{0};
      starts.reserve(group.row_lengths.size() + 1);
      for (const std::uint64_t length : group.row_lengths) starts.push_back(starts.back() + length);
      chunks->starts.push_back(std::move(starts));
      free_vector(group.row_lengths);
    }
    chunks->groups = std::move(groups);
    chunks->redecode = std::move(redecode);
    wire_sequence(column, std::move(chunks), size);
    return column;
  }
  std::uint64_t elements = 1;
  for (std::int64_t length : uniform) {
    column.row_shape.push_back(static_cast<std::uint64_t>(length));
    elements *= static_cast<std::uint64_t>(length);
  }
  column.padded_dim = column.row_shape.empty() ? 1 : column.row_shape.back();
  chunks->row_bytes = elements * size;
  // A tensor's rows all have one length: the lengths kept in case it was a sequence (8 bytes a
  // row, 3 MiB of row_groups_96m's 99 MiB) go.
  for (std::size_t g = 0; g < groups.size(); ++g) {
    free_vector(groups[g].row_lengths);
    if (chunks->resident[g]) {
      spread_list_nulls(leaf, groups[g], chunks->row_bytes);
      stitch_rows(groups[g], chunks->row_bytes);
    }
  }
  chunks->groups = std::move(groups);
  const std::uint64_t row_bytes = chunks->row_bytes;
  chunks->redecode = [redecode = std::move(redecode), leaf, row_bytes](std::size_t g) {
    DecodedChunk group = redecode(g);
    free_vector(group.row_lengths);
    spread_list_nulls(leaf, group, row_bytes);
    stitch_rows(group, row_bytes);
    return group;
  };
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
  column.conversion = leaf.conversion;
  column.rows = rows;
  const std::string where = "column " + leaf.shown_name;
  auto unread = [origin, where]() {
    return Error(origin, where, "was opened for its description only; its values were not read");
  };
  if (leaf.strings() && leaf.binary) {
    column.kind = ColumnKind::sequence;
    column.role = ColumnRole::sequence;
    column.padded_dim = 0;
    column.row_length = [unread](std::uint64_t) -> std::uint64_t { throw unread(); };
    column.read_sequence = [unread](std::uint64_t, std::span<std::byte>) { throw unread(); };
    return column;
  }
  if (leaf.strings()) {
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

// How many bytes of decoded values (fixed-width values, text bytes and offsets) a file keeps from
// its open on: two of its largest row groups, and at least the floor (256 MiB), so that a file of
// small row groups is decoded once and read where its values lie. The rest is decoded again, a
// row group at a time, when read: pack reads rows in order, so that costs one decode per row
// group and pass (counted: none twice in a pass, with 2 or 8 threads, so no floor is needed
// against thrash), and each column holds one decoded row group (its slot) on top of the budget.
// The floor is speed bought with memory that pack may use anyway (one shard plus at most 512
// MiB: docs/cli.md): every decode again costs a pass over the row group (the writers benchmark's
// 300 MiB file packed in 0.50 s with two of its six row groups kept, 0.35 s with all).
// GPUCACHE_PARQUET_RESIDENT_MIB sets the floor (0: two row groups only), for machines with little
// memory and for the tests that hold a pack to a few row groups (FORMAT.md has the measurements).
constexpr std::uint64_t kResidentFloorMiB = 256;
constexpr std::uint64_t kResidentGroups = 2;
std::uint64_t resident_floor() {
  static constexpr const char* kVariable = "GPUCACHE_PARQUET_RESIDENT_MIB";
  const char* text = std::getenv(kVariable);
  if (text == nullptr || *text == '\0') return kResidentFloorMiB << 20;
  std::uint64_t mib = 0;
  const char* end = text + std::strlen(text);
  const auto [stop, failure] = std::from_chars(text, end, mib);
  if (failure != std::errc() || stop != end || mib > (std::uint64_t{1} << 40))
    throw Error(kVariable, "", std::string("must be a whole number of MiB, not '") + text + "'");
  return mib << 20;
}
std::uint64_t resident_budget(std::uint64_t floor, std::uint64_t largest_group) {
  const auto groups = checked_mul(largest_group, kResidentGroups);
  return std::max(floor, groups.value_or(UINT64_MAX));
}

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return checked_add(a, b).value_or(UINT64_MAX);
}

// A chunk's decoded size as its footer tells it, before it is decoded: fixed-width values as
// num_values values of the column's dtype (a null counts as the placeholder it becomes); strings
// as the chunk's pages decompressed (PLAIN strings with their 4-byte lengths, or a dictionary
// page and its indexes) plus 8 bytes of offset a value. A dictionary of repeated strings may
// expand past that: such a chunk is dropped once decoded (read_parquet), not kept beyond it.
std::uint64_t planned_bytes(const LeafColumn& column, const ColumnMetadata& chunk) {
  const auto values = static_cast<std::uint64_t>(std::max<std::int64_t>(0, chunk.num_values));
  if (!column.strings()) return checked_mul(values, dtype_size(column.dtype)).value_or(UINT64_MAX);
  const auto pages =
      static_cast<std::uint64_t>(std::max<std::int64_t>(0, chunk.total_uncompressed_size));
  return saturating_add(
      pages, checked_mul(saturating_add(values, 1), std::uint64_t{8}).value_or(UINT64_MAX));
}

// Which chunks keep their values from the open on, decided from the footer before any is decoded
// so that every run keeps the same ones: the budget is max(floor, 2 × the largest row group's
// planned bytes), shared by every Parquet file open in the process (OpenFiles::reserved: what
// the files opened before this one keep counts against it, so a pack of N files keeps one
// budget, not N); within what is left of it, chunks are taken in file order (row group by row
// group, column by column), each kept when it fits in what remains, so the first row groups are
// kept and a later chunk that fits (a small column's) too. `planned[c][g]`: bytes of column c
// in row group g. Reserves what is available in `reservation` (and names the file there);
// `headroom`: what of it the plan leaves unused.
std::vector<std::vector<char>> plan_resident(const std::vector<std::vector<std::uint64_t>>& planned,
                                             std::uint64_t floor, Reservation& reservation,
                                             std::uint64_t& headroom) {
  const std::size_t columns = planned.size(), groups = columns == 0 ? 0 : planned[0].size();
  std::uint64_t largest_group = 0;
  for (std::size_t g = 0; g < groups; ++g) {
    std::uint64_t group = 0;
    for (std::size_t c = 0; c < columns; ++c) group = saturating_add(group, planned[c][g]);
    largest_group = std::max(largest_group, group);
  }
  const std::uint64_t budget = resident_budget(floor, largest_group);
  std::vector<std::vector<char>> resident(columns, std::vector<char>(groups, 0));
  OpenFiles& files = OpenFiles::instance();
  std::lock_guard lock(files.mutex);
  reservation.file = files.next_file++;
  const std::uint64_t available = budget > files.reserved ? budget - files.reserved : 0;
  std::uint64_t used = 0;
  for (std::size_t g = 0; g < groups; ++g)
    for (std::size_t c = 0; c < columns; ++c)
      if (planned[c][g] <= available - used) {
        resident[c][g] = 1;
        used += planned[c][g];
      }
  // All that is available is reserved while the file is opened (what its kept text may take
  // beyond its plan comes out of the rest: read_parquet), and what is not kept given back then.
  reservation.bytes = available;
  files.reserved += available;
  headroom = available - used;
  return resident;
}

// Decodes a column's chunk of row group g again, from the file that stays mapped; a text chunk
// into a buffer of the size its strings took at the open (`text_sizes`).
Redecode redecoder(std::shared_ptr<const detail::MappedFile> file,
                   std::shared_ptr<const FileMetadata> metadata, std::uint64_t data_end,
                   const LeafColumn& column, const std::vector<std::uint64_t>& first_rows,
                   std::vector<std::uint64_t> text_sizes) {
  return [file = std::move(file), metadata = std::move(metadata), data_end, column, first_rows,
          text_sizes = std::move(text_sizes)](std::size_t g) {
    const RowGroup& group = metadata->row_groups[g];
    return decode_chunk(file->bytes(), data_end, file->path(), column,
                        group.columns[column.leaf_index], g, group.num_rows, first_rows[g],
                        text_sizes.empty() ? 0 : text_sizes[g], file);
  };
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
  const auto metadata_shared = std::make_shared<const FileMetadata>(read_footer(*file, data_end));
  const FileMetadata& metadata = *metadata_shared;
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
    std::vector<const SchemaNode*> above;
    plan_fields(field, above, field.element->name, leaf_index, columns, left_out);
    leaf_index += field_leaves;
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

  // Every (column, row group) chunk, decoded in parallel, row group by row group. A bad file
  // fails with the error of its first bad chunk in file order, whatever the threads: each task
  // keeps its own. Which chunks keep their values from the open on (the resident budget) is
  // decided before any is decoded, from the footer (plan_resident); the others' values (and a
  // text chunk's bytes and offsets) are dropped once decoded, their rows, nulls and list lengths
  // kept, and decoded again when read (ColumnChunks), so that memory follows a few row groups,
  // not the file, and a run keeps the same row groups whatever order its threads finish in.
  const std::size_t groups = metadata.row_groups.size();
  // Metadata only (probe): a column without lists is described by the footer alone; a list
  // column's levels are still decoded, since only they tell its kind and row shape.
  auto described = [&](std::size_t c) {
    return !options.tensor_data && columns[c].max_repetition == 0;
  };
  std::vector<std::vector<std::uint64_t>> planned(columns.size());  // bytes, per column and group
  for (std::size_t c = 0; c < columns.size(); ++c) {
    planned[c].assign(groups, 0);
    if (described(c)) continue;
    for (std::size_t g = 0; g < groups; ++g)
      planned[c][g] = planned_bytes(
          columns[c], *metadata.row_groups[g].columns[columns[c].leaf_index].metadata);
  }
  auto reservation = std::make_shared<Reservation>();
  std::uint64_t headroom = 0;
  std::vector<std::vector<char>> resident =
      plan_resident(planned, resident_floor(), *reservation, headroom);
  // Text chunks planned resident whose strings outgrow their plan (a dictionary of repeated
  // strings, which the footer does not size): held while what they take beyond it fits in the
  // headroom; kept at the end only if all of them fit together, else all dropped, so that which
  // are kept does not depend on the order the threads finish.
  std::mutex overflow_mutex;
  std::uint64_t overflow = 0;
  bool overflow_refused = false;
  std::vector<std::vector<char>> overflowed(columns.size(), std::vector<char>(groups, 0));
  // Per text column and row group, the bytes its strings decoded to (for decoding it again).
  std::vector<std::vector<std::uint64_t>> text_sizes(columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c)
    if (columns[c].strings()) text_sizes[c].assign(groups, 0);
  std::vector<std::uint64_t> first_rows(groups, 0);
  for (std::size_t g = 1; g < groups; ++g)
    first_rows[g] =
        first_rows[g - 1] + static_cast<std::uint64_t>(metadata.row_groups[g - 1].num_rows);
  std::vector<std::exception_ptr> failures(columns.size() * groups);
  std::vector<std::vector<DecodedChunk>> decoded(columns.size());
  for (auto& column : decoded) column.resize(groups);
  detail::parallel_for_each(columns.size() * groups, options.threads, [&](std::uint64_t task) {
    const std::size_t g = task / columns.size(), c = task % columns.size();
    if (described(c)) return;
    const RowGroup& group = metadata.row_groups[g];
    try {
      DecodedChunk& chunk = decoded[c][g];
      chunk = decode_chunk(file->bytes(), data_end, path, columns[c],
                           group.columns[columns[c].leaf_index], g, group.num_rows, first_rows[g],
                           0, file);
      if (!chunk.left_out.empty()) return;
      if (columns[c].strings()) text_sizes[c][g] = chunk.text.size();
      if (resident[c][g] && columns[c].strings()) {
        const std::uint64_t bytes = chunk.text.size() + chunk.text_offsets.size() * 8;
        if (bytes > planned[c][g]) {
          std::lock_guard lock(overflow_mutex);
          if (!overflow_refused && bytes - planned[c][g] <= headroom - overflow) {
            overflow += bytes - planned[c][g];
            overflowed[c][g] = 1;
          } else {
            overflow_refused = true;
            resident[c][g] = 0;
          }
        }
      }
      if (resident[c][g]) {
        chunk.text.shrink_to_fit();  // they grew by doubling
        chunk.text_offsets.shrink_to_fit();
      } else {
        drop_values(chunk);
        free_vector(chunk.text);
        free_vector(chunk.text_offsets);
      }
    } catch (...) {
      failures[g * columns.size() + c] = std::current_exception();
    }
  });
  for (const auto& failure : failures)
    if (failure) std::rethrow_exception(failure);
  std::uint64_t kept_bytes = overflow_refused ? 0 : overflow;
  for (std::size_t c = 0; c < columns.size(); ++c)
    for (std::size_t g = 0; g < groups; ++g) {
      if (overflow_refused && overflowed[c][g]) {
        resident[c][g] = 0;
        free_vector(decoded[c][g].text);
        free_vector(decoded[c][g].text_offsets);
      }
      if (resident[c][g]) kept_bytes += planned[c][g];
    }
  // What is not kept goes back to the budget.
  reservation->give_back_beyond(kept_bytes);

  InputData data;
  for (std::size_t c = 0; c < columns.size(); ++c) {
    std::string refusal;
    InputColumn column =
        described(c) ? describe_column(columns[c], static_cast<std::uint64_t>(total_rows), path)
                     : make_column(columns[c], std::move(decoded[c]), std::move(resident[c]),
                                   redecoder(file, metadata_shared, data_end, columns[c],
                                             first_rows, std::move(text_sizes[c])),
                                   reservation, path, refusal);
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
