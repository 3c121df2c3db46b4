#include "schema_columns.hpp"

#include <cstring>

#include "gpucache/error.hpp"
#include "schema_path.hpp"
#include "tree_column.hpp"
#include "value_summary.hpp"

namespace gpucache::detail {
namespace {

class ColumnBuilder {
 public:
  ColumnBuilder(InputColumn& column, TreeColumn& tree) : column_(column), tree_(tree) {}

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

  void from_matrix(const std::shared_ptr<Tensor>& tensor) {
    const auto& shape = tensor->shape;
    if (shape.empty()) fail("is a 0-d tensor (a single value), not a column");
    for (std::size_t i = 1; i + 1 < shape.size(); ++i) {
      if (shape[i] != 1)
        fail("is " + tensor_text(*tensor) +
             "; a column is [rows, dim], with any dims between those equal to 1");
    }
    check_bounds(*tensor, -1);
    column_.kind = ColumnKind::tensor;
    column_.dtype = tensor->dtype;
    column_.rows = static_cast<std::uint64_t>(shape.front());
    const std::uint64_t dim = shape.size() == 1 ? 1 : static_cast<std::uint64_t>(shape.back());
    if (dim == 0) fail("is " + tensor_text(*tensor) + ": its rows hold no values");
    set_vector_rows(dim, shape.size() > 1);
    tree_.matrix = tensor;
  }

  void from_texts(const std::vector<std::string_view>& texts) {
    column_.kind = ColumnKind::text;
    column_.dtype = DType::u8;
    column_.rows = texts.size();
    tree_.row_texts = texts;
  }

  // Rows of `dim` values: [dim] rows, or scalars when the input has no row dimension.
  void set_vector_rows(std::uint64_t dim, bool has_row_dimension) {
    column_.row_shape = has_row_dimension ? std::vector<std::uint64_t>{dim}
                                          : std::vector<std::uint64_t>{};
    column_.padded_dim = dim;
    tree_.row_elements = dim;
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

  void from_tensor_rows(const std::vector<const Value*>& rows) {
    const Tensor& first = *rows.front()->as_tensor();
    column_.kind = ColumnKind::tensor;
    column_.dtype = first.dtype;
    column_.rows = rows.size();
    tree_.row_tensors.reserve(rows.size());
    for (std::size_t row = 0; row < rows.size(); ++row) {
      const Tensor* tensor = rows[row]->as_tensor();
      if (!tensor) mismatch(row, *rows[row], "a tensor");
      const auto& shape = tensor->shape;
      for (std::size_t i = 0; i + 1 < shape.size(); ++i) {
        if (shape[i] != 1)
          fail(row_name(row) + " is " + tensor_text(*tensor) +
               "; each row must be one vector, [D] or [1, D]");
      }
      const std::uint64_t dim = shape.empty() ? 1 : static_cast<std::uint64_t>(shape.back());
      if (row == 0) {
        if (dim == 0) fail("row 0 is " + tensor_text(*tensor) + ": it holds no values");
        set_vector_rows(dim, !shape.empty());
      } else if (dim != tree_.row_elements) {
        fail(row_name(row) + " has " + std::to_string(dim) + " values (" + tensor_text(*tensor) +
             ") but row 0 has " + std::to_string(tree_.row_elements));
      }
      if (tensor->dtype != column_.dtype)
        fail(row_name(row) + " is " + std::string(dtype_name(tensor->dtype)) + " but row 0 is " +
             std::string(dtype_name(column_.dtype)));
      check_bounds(*tensor, static_cast<std::int64_t>(row));
      tree_.row_tensors.push_back(tensor);
    }
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
        Tensor::from_buffer(dtype, {static_cast<std::int64_t>(rows.size()), 1}, std::move(bytes)),
        false);
  }

  void from_number_list_rows(const std::vector<const Value*>& rows) {
    const std::size_t dim = rows.front()->as_list()->items.size();
    if (dim == 0) fail("row 0 is an empty list: it holds no values");
    bool any_float = false;
    for (std::size_t row = 0; row < rows.size(); ++row) {
      const List* list = rows[row]->as_list();
      if (!list) mismatch(row, *rows[row], "a list of numbers");
      if (list->items.size() != dim)
        fail(row_name(row) + " has " + std::to_string(list->items.size()) +
             " values but row 0 has " + std::to_string(dim));
      for (std::size_t i = 0; i < dim; ++i) {
        const Value& item = list->items[i];
        if (!item.as_int() && !item.as_float())
          fail(row_name(row) + " element " + std::to_string(i) + " is " +
               std::string(item.type_name()) + "; a vector holds only numbers");
        any_float = any_float || item.as_float();
      }
    }
    const DType dtype = any_float ? DType::f64 : DType::i64;
    std::vector<std::byte> bytes(rows.size() * dim * 8);
    std::byte* out = bytes.data();
    for (const Value* row : rows) {
      for (const auto& item : row->as_list()->items) {
        store_number(item, dtype, out);
        out += 8;
      }
    }
    own_matrix(Tensor::from_buffer(
        dtype, {static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(dim)},
        std::move(bytes)),
        true);
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

  void own_matrix(Tensor tensor, bool vector_rows) {
    column_.kind = ColumnKind::tensor;
    column_.dtype = tensor.dtype;
    column_.rows = static_cast<std::uint64_t>(tensor.shape[0]);
    set_vector_rows(static_cast<std::uint64_t>(tensor.shape[1]), vector_rows);
    tree_.matrix = std::make_shared<const Tensor>(std::move(tensor));
  }

  InputColumn& column_;
  TreeColumn& tree_;
};

}  // namespace

InputColumn build_column(const Value& root, const std::string& origin, const FieldSpec& field) {
  const KeyPath path = parse_path(field.path);
  InputColumn column;
  column.name = field.column;
  column.path = format_path(path);
  column.origin = origin;
  auto tree = std::make_shared<TreeColumn>();
  tree->keep_alive = root;
  ColumnBuilder(column, *tree).from_target(resolve_path(root, path, origin));
  wire_row_access(column, std::move(tree));
  return column;
}

}  // namespace gpucache::detail
