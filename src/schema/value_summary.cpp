#include "value_summary.hpp"

#include <algorithm>
#include <cstdio>

namespace gpucache::detail {

std::string tensor_text(const Tensor& tensor) {
  std::string text =
      "tensor " + std::string(dtype_name(tensor.dtype)) + " " + shape_text(tensor.shape);
  const bool dense = tensor.strides.size() == tensor.shape.size() && [&] {
    std::int64_t expected = 1;
    for (std::size_t i = tensor.shape.size(); i-- > 0;) {
      if (tensor.shape[i] != 1 && tensor.strides[i] != expected) return false;
      expected *= tensor.shape[i];
    }
    return true;
  }();
  if (tensor.big_endian && dtype_size(tensor.dtype) > 1) text += " big-endian";
  if (!dense) text += " strided";
  return text;
}

std::string quote_text(std::string_view text, std::size_t max_chars) {
  std::string out = "\"";
  std::size_t chars = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool starts_char = (c & 0xC0) != 0x80;  // not a UTF-8 continuation byte
    if (starts_char && chars++ == max_chars) {
      out += "...";
      break;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string value_signature(const Value& value, int sized_levels, int depth) {
  if (const Tensor* tensor = value.as_tensor()) return tensor_text(*tensor);
  if (depth <= 0) return std::string(value.type_name()) + "{...}";
  if (const List* list = value.as_list()) {
    std::string head = std::string(value.type_name());
    if (sized_levels > 0) {  // appended piecewise: "[" + std::to_string() trips GCC 12's -Wrestrict
      head += '[';
      head += std::to_string(list->items.size());
      head += ']';
    }
    if (list->items.empty()) return head;
    const std::string first = value_signature(list->items.front(), sized_levels - 1, depth - 1);
    const std::size_t compared = std::min<std::size_t>(list->items.size(), 64);
    for (std::size_t i = 1; i < compared; ++i) {
      if (value_signature(list->items[i], sized_levels - 1, depth - 1) != first)
        return head + " of mixed types";
    }
    return head + " of " + first;
  }
  if (const Dict* dict = value.as_dict()) {
    std::string text = "dict{";
    std::size_t shown = 0;
    for (const auto& [key, item] : dict->items) {
      if (shown == 12) {
        text += ", ... " + std::to_string(dict->items.size()) + " keys";
        break;
      }
      if (shown++ > 0) text += ", ";
      text += key + ": " + value_signature(item, sized_levels - 1, depth - 1);
    }
    return text + "}";
  }
  return std::string(value.type_name());
}

}  // namespace gpucache::detail
