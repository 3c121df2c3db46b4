// probe_text: the object tree as an indented outline, then the layout and column mapping.
#include <algorithm>
#include <charconv>
#include <sstream>

#include "gpucache/probe.hpp"
#include "probe_analysis.hpp"
#include "value_summary.hpp"

namespace gpucache {
namespace {

constexpr std::size_t kShownVariants = 5;
constexpr std::size_t kSmallList = 8;  // mixed lists up to this long are shown element by element

std::string scalar_text(const Value& value) {
  if (const std::string* text = value.as_string()) return "str " + detail::quote_text(*text, 60);
  if (const std::int64_t* number = value.as_int()) return "int " + std::to_string(*number);
  if (const double* number = value.as_float()) {
    // Shortest round-trip digits, with ".0" on whole numbers, as Python prints them.
    char buffer[32];
    const auto end = std::to_chars(buffer, buffer + sizeof buffer, *number).ptr;
    std::string text(buffer, end);
    if (text.find_first_of(".eni") == std::string::npos) text += ".0";
    return "float " + text;
  }
  if (const bool* flag = std::get_if<bool>(&value.data)) return *flag ? "bool True" : "bool False";
  return std::string(value.type_name());
}

// Keys come from untrusted files: quote the ones that would break the outline.
std::string key_label(const std::string& key) {
  const bool plain =
      !key.empty() && key.size() <= 80 && std::none_of(key.begin(), key.end(), [](char c) {
        return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
      });
  return (plain ? key : detail::quote_text(key, 60)) + ": ";
}

class TextRenderer {
 public:
  TextRenderer(const ProbeOptions& options, std::ostringstream& out)
      : options_(options), out_(out) {}

  // Writes "<label><description>" and, for expanded containers, their entries below it.
  void node(const std::string& label, const Value& value, std::size_t indent, std::size_t depth) {
    const std::string pad(indent, ' ');
    if (const List* list = value.as_list())
      return list_node(pad + label, *list, value, indent, depth);
    if (const Dict* dict = value.as_dict()) return dict_node(pad + label, *dict, indent, depth);
    if (const Tensor* tensor = value.as_tensor()) {
      out_ << pad << label << detail::tensor_text(*tensor) << '\n';
      return;
    }
    out_ << pad << label << scalar_text(value) << '\n';
  }

 private:
  void list_node(const std::string& head, const List& list, const Value& value, std::size_t indent,
                 std::size_t depth) {
    const std::string type(value.type_name());
    const std::string sized = type + "[" + std::to_string(list.items.size()) + "]";
    if (list.items.empty()) {
      out_ << head << sized << '\n';
      return;
    }
    if (depth >= options_.max_depth) {
      out_ << head << sized << " (nested too deep to show)\n";
      return;
    }
    const auto variants = detail::group_elements(detail::list_elements(list));
    if (variants.size() == 1) {
      const Value& first = list.items.front();
      if (first.as_string()) {
        out_ << head << sized << " of str" << string_samples(list) << '\n';
      } else if (first.as_dict() && !first.as_dict()->items.empty()) {
        out_ << head << sized << " of dicts with the same keys and types; [0]:\n";
        entries(*first.as_dict(), indent + 2, depth + 1);
      } else {
        out_ << head << sized << " of " << variants.front().signature << '\n';
      }
      return;
    }
    if (list.items.size() <= kSmallList) {
      out_ << head << sized << '\n';
      for (std::size_t i = 0; i < list.items.size(); ++i)
        node(std::string("[").append(std::to_string(i)).append("]: "), list.items[i], indent + 2,
             depth + 1);
      return;
    }
    out_ << head << sized << " of " << variants.size() << " different structures:\n";
    variants_lines(variants, indent + 2);
  }

  void dict_node(const std::string& head, const Dict& dict, std::size_t indent, std::size_t depth) {
    const std::size_t size = dict.items.size();
    if (size == 0) {
      out_ << head << "dict (empty)\n";
      return;
    }
    if (depth >= options_.max_depth) {
      out_ << head << "dict with " << size << " keys (nested too deep to show)\n";
      return;
    }
    if (size > options_.max_keys) {
      const auto variants = detail::group_elements(detail::dict_values(dict));
      if (variants.size() == 1) {
        out_ << head << "dict[" << size << "] of str -> " << variants.front().signature
             << ", keys e.g. " << key_samples(dict) << '\n';
        return;
      }
    }
    out_ << head << "dict with " << size << (size == 1 ? " key" : " keys") << '\n';
    entries(dict, indent + 2, depth + 1);
  }

  void entries(const Dict& dict, std::size_t indent, std::size_t depth) {
    std::size_t shown = 0;
    for (const auto& [key, item] : dict.items) {
      if (shown++ == options_.max_keys) {
        out_ << std::string(indent, ' ') << "... and " << dict.items.size() - options_.max_keys
             << " more keys\n";
        return;
      }
      node(key_label(key), item, indent, depth);
    }
  }

  void variants_lines(const std::vector<detail::ElementVariant>& variants, std::size_t indent) {
    const std::string pad(indent, ' ');
    for (std::size_t i = 0; i < variants.size() && i < kShownVariants; ++i) {
      const auto& variant = variants[i];
      out_ << pad << variant.count << " x " << variant.signature << " (first at ["
           << variant.first_index << "])\n";
    }
    if (variants.size() > kShownVariants)
      out_ << pad << "... and " << variants.size() - kShownVariants << " more structures\n";
  }

  std::string string_samples(const List& list) const {
    std::string text;
    for (std::size_t i = 0; i < list.items.size() && i < options_.string_samples; ++i)
      text += (i ? ", " : ", e.g. ") + detail::quote_text(*list.items[i].as_string(), 40);
    return text;
  }

  std::string key_samples(const Dict& dict) const {
    std::string text;
    for (std::size_t i = 0; i < dict.items.size() && i < options_.string_samples; ++i)
      text += (i ? ", " : "") + detail::quote_text(dict.items[i].first, 40);
    return text;
  }

  const ProbeOptions& options_;
  std::ostringstream& out_;
};

std::string indented(const std::string& text, const std::string& pad) {
  std::string out = pad;
  for (char c : text) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

void mapping_section(const detail::ProbeMapping& result, std::ostringstream& out) {
  if (!result.mapping) {
    out << "layout: none\n" << indented(result.error, "  ") << '\n';
    return;
  }
  const SourceMapping& mapping = *result.mapping;
  out << "layout: " << source_kind_name(mapping.kind) << ", " << mapping.rows << " rows\n"
      << indented(mapping.explanation, "  ") << '\n'
      << "columns:\n";
  std::size_t width = 0;
  for (const auto& column : mapping.columns) width = std::max(width, column.name.size());
  for (const auto& column : mapping.columns) {
    // "embedding f32 [384]", "tensor u8 [3, 32, 32]", "sequence i64", "text".
    std::string type(column_role_name(column.role));
    // Appended piecewise: " " + std::string() trips GCC 12's -Wrestrict.
    if (column.kind != ColumnKind::text) {
      type += ' ';
      type += dtype_name(column.dtype);
    }
    if (column.kind == ColumnKind::tensor) {
      type += " [";
      for (std::size_t d = 0; d < column.row_shape.size(); ++d)
        type += (d ? ", " : "") + std::to_string(column.row_shape[d]);
      type += "]";
    }
    if (column.time) {  // "tensor i64 [] timestamp[us, UTC]": the integers' meaning
      type += ' ';
      type += describe_time(*column.time);
    }
    type.resize(std::max<std::size_t>(type.size(), 16), ' ');
    out << "  " << column.name << std::string(width - column.name.size() + 2, ' ') << type
        << " from " << column.path << '\n';
  }
  for (const auto& entry : mapping.left_out) out << "left out: " << left_out_entry(entry) << '\n';
  if (!mapping.not_selected.empty()) {
    out << "not selected (--field names the columns):";
    for (std::size_t i = 0; i < mapping.not_selected.size(); ++i)
      out << (i ? ", " : " ") << mapping.not_selected[i];
    out << '\n';
  }
  out << "flags: " << format_flags(mapping.kind, mapping.fields) << '\n';
}

}  // namespace

std::string probe_text(const Value& root, const std::string& origin, const ProbeOptions& options) {
  return probe_text(InputData{.tree = root}, origin, options);
}

std::string probe_text(const InputData& data, const std::string& origin,
                       const ProbeOptions& options) {
  std::ostringstream out;
  const auto mapped = detail::try_mapping(data, origin, options);
  if (data.columnar()) {
    out << origin << ": " << data.columns.size() << " array"
        << (data.columns.size() == 1 ? "" : "s") << '\n';
    for (const auto& column : data.columns) out << "  " << detail::array_text(column) << '\n';
    // A mapping lists what it leaves out (the reader's fields among them) below.
    if (!mapped.mapping)
      for (const auto& entry : data.left_out)
        out << "  left out: " << left_out_entry(entry) << '\n';
  } else {
    TextRenderer(options, out).node(origin + ": ", data.tree, 0, 0);
  }
  mapping_section(mapped, out);
  return out.str();
}

}  // namespace gpucache
