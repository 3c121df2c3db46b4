#include "schema_columns.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

#include "gpucache/error.hpp"
#include "schema_path.hpp"
#include "tree_column.hpp"
#include "value_summary.hpp"

namespace gpucache::detail {
namespace {

bool integer_dtype(DType dtype) {
  return !dtype_is_float(dtype) && dtype != DType::boolean;
}

std::vector<std::uint64_t> extents(const std::vector<std::int64_t>& shape, std::size_t from) {
  std::vector<std::uint64_t> out;
  for (std::size_t i = from; i < shape.size(); ++i)
    out.push_back(static_cast<std::uint64_t>(shape[i]));
  return out;
}

std::uint64_t product(const std::vector<std::uint64_t>& shape) {
  std::uint64_t elements = 1;
  for (std::uint64_t extent : shape) elements *= extent;
  return elements;
}

// A shape without its dimensions of 1: [1, D] and [D] rows are the same vector.
std::vector<std::int64_t> squeezed(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> out;
  for (std::int64_t extent : shape)
    if (extent != 1) out.push_back(extent);
  return out;
}

class ColumnBuilder {
 public:
  ColumnBuilder(InputColumn& column, TreeColumn& tree, std::optional<ColumnRole> role)
      : column_(column), tree_(tree), role_(role) {}

  void from_target(const PathTarget& target) {
    switch (target.form) {
      case PathTarget::Form::keys:
        return from_texts(target.keys);
      case PathTarget::Form::gathered:
        return from_rows(target.gathered);
      case PathTarget::Form::node:
        return from_node(*target.node);
    }
  }

  // Makes the column what `role` needs, where the rows allow it: embedding rows are float vectors
  // ([1, D] and [D, 1] rows are vectors too), a tensor column of sequences needs rows of one
  // length, sequences are read from 1-D rows.
  void apply_role(ColumnRole role) {
    switch (role) {
      case ColumnRole::embedding:
        return make_embedding();
      case ColumnRole::tensor:
        if (column_.kind == ColumnKind::sequence) return sequences_to_tensor();
        if (column_.kind == ColumnKind::text) fail("holds text, not a tensor");
        column_.role = ColumnRole::tensor;
        return;
      case ColumnRole::sequence:
        if (column_.kind == ColumnKind::tensor) return tensor_to_sequences();
        if (column_.kind == ColumnKind::text) fail("holds text, not sequences of numbers");
        column_.role = ColumnRole::sequence;
        return;
      case ColumnRole::text:
        if (column_.kind != ColumnKind::text)
          fail("must be text but holds numbers (" + std::string(dtype_name(column_.dtype)) + ")");
        return;
    }
  }

 private:
  [[noreturn]] void fail(const std::string& cause) const {
    throw Error(column_.origin, where(), cause);
  }
  std::string where() const { return "column " + column_.name + " (path '" + column_.path + "')"; }
  std::string row_name(std::size_t row) const { return "row " + std::to_string(row); }

  void from_node(const Value& node) {
    if (const auto* tensor = std::get_if<std::shared_ptr<Tensor>>(&node.data)) {
      return from_matrix(*tensor);
    }
    if (const List* list = node.as_list()) {
      std::vector<const Value*> rows;
      rows.reserve(list->items.size());
      for (const auto& item : list->items) rows.push_back(&item);
      return from_rows(rows);
    }
    if (const Dict* dict = node.as_dict())
      fail("is a dict with " + std::to_string(dict->items.size()) +
           " keys, not a column: use PATH.@keys for its keys or PATH[*] for its values");
    fail("is a single " + std::string(node.type_name()) + ", not a column");
  }

  // row < 0: the column's single tensor. The row's name is only built on failure: this runs
  // once per row.
  void check_bounds(const Tensor& tensor, std::int64_t row) const {
    try {
      tensor.check_bounds(column_.origin);
    } catch (const Error& error) {
      throw Error(column_.origin,
                  where() + (row < 0 ? "" : ", " + row_name(static_cast<std::size_t>(row))),
                  error.cause());
    }
  }

  void set_tensor_rows(DType dtype, std::uint64_t rows, std::vector<std::uint64_t> row_shape) {
    if (row_shape.size() > kMaxRowDims)
      fail("rows have " + std::to_string(row_shape.size()) + " dimensions; at most " +
           std::to_string(kMaxRowDims) + " are stored");
    column_.kind = ColumnKind::tensor;
    column_.role = ColumnRole::tensor;
    column_.dtype = dtype;
    column_.rows = rows;
    tree_.row_elements = product(row_shape);
    column_.padded_dim = row_shape.empty() ? 1 : row_shape.back();
    column_.row_shape = std::move(row_shape);
  }

  void set_sequence_rows(DType dtype, std::uint64_t rows) {
    column_.kind = ColumnKind::sequence;
    column_.role = ColumnRole::sequence;
    column_.dtype = dtype;
    column_.rows = rows;
    column_.row_shape.clear();
    column_.padded_dim = 0;
  }

  void from_matrix(const std::shared_ptr<Tensor>& tensor) {
    const auto& shape = tensor->shape;
    if (shape.empty()) fail("is a 0-d tensor (a single value), not a column");
    check_bounds(*tensor, -1);
    auto row_shape = extents(shape, 1);
    if (std::find(row_shape.begin(), row_shape.end(), 0) != row_shape.end())
      fail("is " + tensor_text(*tensor) + ": its rows hold no values");
    set_tensor_rows(tensor->dtype, static_cast<std::uint64_t>(shape.front()), std::move(row_shape));
    tree_.matrix = tensor;
    if (tensor->time) {
      column_.time = tensor->time;
      note_nat_rows(*tensor);
    }
  }

  // numpy's NaT (INT64_MIN) in a datetime64/timedelta64 array is a null: its row goes to
  // null_rows (pack drops it with the reason null). Not known without the data (probe).
  void note_nat_rows(const Tensor& tensor) {
    if (!tensor.has_data() || tree_.row_elements == 0) return;
    constexpr std::uint64_t kBlock = 1 << 16;
    std::vector<std::int64_t> block;
    const std::uint64_t total = tensor.numel();
    for (std::uint64_t first = 0; first < total; first += kBlock) {
      block.resize(std::min(kBlock, total - first));
      tensor.copy_row_major(first, std::as_writable_bytes(std::span(block)));
      for (std::size_t i = 0; i < block.size(); ++i) {
        if (block[i] != std::numeric_limits<std::int64_t>::min()) continue;
        const std::uint64_t row = (first + i) / tree_.row_elements;
        if (column_.null_rows.empty() || column_.null_rows.back() != row)
          column_.null_rows.push_back(row);
      }
    }
  }

  void from_texts(const std::vector<std::string_view>& texts) {
    column_.kind = ColumnKind::text;
    column_.role = ColumnRole::text;
    column_.dtype = DType::u8;
    column_.rows = texts.size();
    tree_.row_texts = texts;
  }

  void from_rows(const std::vector<const Value*>& rows) {
    if (rows.empty()) fail("is empty: it has no rows");
    const Value& first = *rows.front();
    if (first.as_string()) return from_string_rows(rows);
    if (first.as_tensor()) return from_tensor_rows(rows);
    if (first.as_list()) return from_number_list_rows(rows);
    if (first.as_int() || first.as_float() || std::holds_alternative<bool>(first.data))
      return from_scalar_rows(rows);
    fail("row 0 is " + value_signature(first) +
         "; rows must be strings, tensors, numbers or lists of numbers" +
         (first.as_dict() ? " (to read a key of each dict, end the path with [*].KEY)" : ""));
  }

  void mismatch(std::size_t row, const Value& value, std::string_view expected) const {
    fail(row_name(row) + " is " + value_signature(value) + " but row 0 is " +
         std::string(expected));
  }

  void from_string_rows(const std::vector<const Value*>& rows) {
    std::vector<std::string_view> texts;
    texts.reserve(rows.size());
    for (std::size_t row = 0; row < rows.size(); ++row) {
      const std::string* text = rows[row]->as_string();
      if (!text) mismatch(row, *rows[row], "str");
      texts.push_back(*text);
    }
    from_texts(texts);
  }

  // A tensor per row: rows of one shape make a tensor column, [rows, *shape] (shapes that differ
  // only in dimensions of 1 are one shape: [D] and [1, D]); 1-D rows of integers, or of lengths
  // that differ, make a sequence column (token ids). Embedding rows must be vectors of one size.
  void from_tensor_rows(const std::vector<const Value*>& rows) {
    const Tensor& first = *rows.front()->as_tensor();
    const bool embedding = role_ == ColumnRole::embedding;
    const auto first_squeezed = squeezed(first.shape);
    bool same_shape = true, same_squeezed = true, one_dimensional = true;
    tree_.row_tensors.reserve(rows.size());
    for (std::size_t row = 0; row < rows.size(); ++row) {
      const Tensor* tensor = rows[row]->as_tensor();
      if (!tensor) mismatch(row, *rows[row], "a tensor");
      if (embedding && squeezed(tensor->shape).size() > 1)
        fail(row_name(row) + " is " + tensor_text(*tensor) +
             "; each row must be one vector, [D] or [1, D]");
      if (embedding && tensor->numel() != first.numel())
        fail(row_name(row) + " has " + std::to_string(tensor->numel()) + " values (" +
             tensor_text(*tensor) + ") but row 0 has " + std::to_string(first.numel()));
      if (tensor->dtype != first.dtype)
        fail(row_name(row) + " is " + std::string(dtype_name(tensor->dtype)) + " but row 0 is " +
             std::string(dtype_name(first.dtype)));
      same_shape = same_shape && tensor->shape == first.shape;
      same_squeezed = same_squeezed && squeezed(tensor->shape) == first_squeezed;
      one_dimensional = one_dimensional && tensor->shape.size() == 1;
      check_bounds(*tensor, static_cast<std::int64_t>(row));
      tree_.row_tensors.push_back(tensor);
    }
    if (!embedding && one_dimensional && (!same_shape || integer_dtype(first.dtype))) {
      set_sequence_rows(first.dtype, rows.size());
      return;
    }
    if (!same_squeezed) {
      for (std::size_t row = 1; row < rows.size(); ++row)
        if (squeezed(rows[row]->as_tensor()->shape) != first_squeezed)
          fail(row_name(row) + " is " + tensor_text(*rows[row]->as_tensor()) + " but row 0 is " +
               tensor_text(first) + "; rows of a tensor column have one shape");
    }
    auto row_shape = same_shape ? extents(first.shape, 0) : extents(first_squeezed, 0);
    if (first.numel() == 0) fail("row 0 is " + tensor_text(first) + ": it holds no values");
    set_tensor_rows(first.dtype, rows.size(), std::move(row_shape));
  }

  // Python numbers in a pickle (or a JSON column of scalars) have no tensor to point into: they
  // are gathered into one owned tensor, i64 when all are integers, f64 otherwise.
  void from_scalar_rows(const std::vector<const Value*>& rows) {
    const bool booleans = std::holds_alternative<bool>(rows.front()->data);
    bool any_float = false;
    for (std::size_t row = 0; row < rows.size(); ++row) {
      const Value& value = *rows[row];
      const bool is_bool = std::holds_alternative<bool>(value.data);
      if (booleans != is_bool || (!is_bool && !value.as_int() && !value.as_float()))
        mismatch(row, value, booleans ? "bool" : "a number");
      any_float = any_float || value.as_float();
    }
    const DType dtype = booleans ? DType::boolean : any_float ? DType::f64 : DType::i64;
    std::vector<std::byte> bytes(rows.size() * dtype_size(dtype));
    for (std::size_t row = 0; row < rows.size(); ++row)
      store_number(*rows[row], dtype, bytes.data() + row * dtype_size(dtype));
    own_matrix(
        Tensor::from_buffer(dtype, {static_cast<std::int64_t>(rows.size())}, std::move(bytes)));
  }

  // Lists of numbers: of integers they are sequences (token ids; lengths may differ, a row may be
  // empty), with a float among them vectors of one length (f64).
  void from_number_list_rows(const std::vector<const Value*>& rows) {
    bool any_float = false;
    std::uint64_t total = 0;
    const std::size_t first_length =
        rows.front()->as_list() ? rows.front()->as_list()->items.size() : 0;
    bool same_length = true;
    for (std::size_t row = 0; row < rows.size(); ++row) {
      const List* list = rows[row]->as_list();
      if (!list) mismatch(row, *rows[row], "a list of numbers");
      for (std::size_t i = 0; i < list->items.size(); ++i) {
        const Value& item = list->items[i];
        if (!item.as_int() && !item.as_float())
          fail(row_name(row) + " element " + std::to_string(i) + " is " +
               std::string(item.type_name()) + "; a row holds only numbers");
        any_float = any_float || item.as_float();
      }
      same_length = same_length && list->items.size() == first_length;
      total += list->items.size();
    }
    const DType dtype = any_float ? DType::f64 : DType::i64;
    std::vector<std::byte> bytes(total * 8);
    std::vector<std::uint64_t> offsets{0};
    offsets.reserve(rows.size() + 1);
    std::byte* out = bytes.data();
    for (const Value* row : rows) {
      for (const auto& item : row->as_list()->items) {
        store_number(item, dtype, out);
        out += 8;
      }
      offsets.push_back(offsets.back() + row->as_list()->items.size());
    }
    if (!any_float) {
      set_sequence_rows(dtype, rows.size());
      tree_.sequence_values = std::move(bytes);
      tree_.sequence_offsets = std::move(offsets);
      return;
    }
    if (!same_length)
      for (std::size_t row = 1; row < rows.size(); ++row)
        if (rows[row]->as_list()->items.size() != first_length)
          fail(row_name(row) + " has " + std::to_string(rows[row]->as_list()->items.size()) +
               " values but row 0 has " + std::to_string(first_length));
    if (first_length == 0) fail("row 0 is an empty list: it holds no values");
    own_matrix(Tensor::from_buffer(
        dtype, {static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(first_length)},
        std::move(bytes)));
  }

  static void store_number(const Value& value, DType dtype, std::byte* out) {
    if (dtype == DType::boolean) {
      *out = std::byte{std::get<bool>(value.data) ? std::uint8_t{1} : std::uint8_t{0}};
    } else if (dtype == DType::f64) {
      const double number =
          value.as_float() ? *value.as_float() : static_cast<double>(*value.as_int());
      std::memcpy(out, &number, 8);
    } else {
      std::memcpy(out, value.as_int(), 8);
    }
  }

  void own_matrix(Tensor tensor) {
    set_tensor_rows(tensor.dtype, static_cast<std::uint64_t>(tensor.shape[0]),
                    extents(tensor.shape, 1));
    tree_.matrix = std::make_shared<const Tensor>(std::move(tensor));
  }

  // Embedding rows are float vectors: dimensions of 1 are dropped ([1, D] rows, [N, 1, D] and
  // scalar rows read as [D] and [1]), anything else is refused.
  void make_embedding() {
    if (column_.kind == ColumnKind::text) fail("must hold vectors but holds text");
    if (!dtype_is_float(column_.dtype) || column_.dtype == DType::fp8_e4m3 ||
        column_.dtype == DType::fp8_e5m2)
      fail("has dtype " + std::string(dtype_name(column_.dtype)) +
           "; embeddings must be f16, bf16, f32 or f64");
    if (column_.kind == ColumnKind::sequence) sequences_to_tensor();
    std::vector<std::uint64_t> vector;
    for (std::uint64_t extent : column_.row_shape)
      if (extent != 1) vector.push_back(extent);
    if (vector.size() > 1)
      fail("has rows of shape " + shape_text(column_.row_shape) +
           "; an embedding row is one vector (use --role " + column_.name + "=tensor)");
    column_.row_shape = {vector.empty() ? 1 : vector.front()};
    column_.padded_dim = column_.row_shape.front();
    column_.role = ColumnRole::embedding;
  }

  void sequences_to_tensor() {
    std::uint64_t length = 0;
    for (std::uint64_t row = 0; row < column_.rows; ++row) {
      const std::uint64_t this_length = column_.rows == 0 ? 0 : sequence_length(row);
      if (row == 0) length = this_length;
      if (this_length != length)
        fail(row_name(row) + " has " + std::to_string(this_length) + " values" +
             (tree_.row_tensors.empty() ? "" : " (" + tensor_text(*tree_.row_tensors[row]) + ")") +
             " but row 0 has " + std::to_string(length));
    }
    if (length == 0) fail("row 0 is empty: it holds no values");
    const DType dtype = column_.dtype;
    if (!tree_.sequence_offsets.empty()) {
      own_matrix(Tensor::from_buffer(
          dtype, {static_cast<std::int64_t>(column_.rows), static_cast<std::int64_t>(length)},
          std::move(tree_.sequence_values)));
      tree_.sequence_offsets.clear();
    } else {
      set_tensor_rows(dtype, column_.rows, {length});
    }
  }

  void tensor_to_sequences() {
    if (column_.row_shape.size() > 1)
      fail("has rows of shape " + shape_text(column_.row_shape) + "; a sequence row is 1-D");
    set_sequence_rows(column_.dtype, column_.rows);
  }

  std::uint64_t sequence_length(std::uint64_t row) const {
    if (!tree_.row_tensors.empty()) return tree_.row_tensors[row]->numel();
    return tree_.sequence_offsets[row + 1] - tree_.sequence_offsets[row];
  }

  static std::string shape_text(const std::vector<std::uint64_t>& shape) {
    std::string text = "[";
    for (std::size_t d = 0; d < shape.size(); ++d)
      text += (d ? ", " : "") + std::to_string(shape[d]);
    return text + "]";
  }

  InputColumn& column_;
  TreeColumn& tree_;
  std::optional<ColumnRole> role_;
};

}  // namespace

InputColumn build_column(const Value& root, const std::string& origin, const FieldSpec& field,
                         std::optional<ColumnRole> role) {
  const KeyPath path = parse_path(field.path);
  InputColumn column;
  column.name = field.column;
  column.path = format_path(path);
  column.origin = origin;
  auto tree = std::make_shared<TreeColumn>();
  tree->keep_alive = root;
  ColumnBuilder builder(column, *tree, role);
  builder.from_target(resolve_path(root, path, origin));
  if (role) builder.apply_role(*role);
  wire_row_access(column, std::move(tree));
  return column;
}

}  // namespace gpucache::detail
