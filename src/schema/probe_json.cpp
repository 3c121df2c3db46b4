// probe_json: the same content as probe_text, as one JSON object for scripts.
#include <nlohmann/json.hpp>

#include "gpucache/probe.hpp"
#include "probe_analysis.hpp"
#include "value_summary.hpp"

namespace gpucache {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::size_t kShownVariants = 5;
constexpr std::size_t kSmallList = 8;
constexpr std::size_t kStringBytes = 200;

// Cut at a UTF-8 character boundary so the dump stays valid.
std::string truncated(const std::string& text) {
  if (text.size() <= kStringBytes) return text;
  std::size_t end = kStringBytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end) + "...";
}

class JsonRenderer {
 public:
  explicit JsonRenderer(const ProbeOptions& options) : options_(options) {}

  Json node(const Value& value, std::size_t depth) const {
    Json out;
    out["type"] = std::string(value.type_name());
    if (const Tensor* tensor = value.as_tensor()) {
      out["dtype"] = std::string(dtype_name(tensor->dtype));
      out["shape"] = tensor->shape;
      const std::string text = detail::tensor_text(*tensor);
      if (text.find(" big-endian") != std::string::npos) out["big_endian"] = true;
      if (text.find(" strided") != std::string::npos) out["strided"] = true;
    } else if (const std::string* text = value.as_string()) {
      out["value"] = truncated(*text);
    } else if (const std::int64_t* number = value.as_int()) {
      out["value"] = *number;
    } else if (const double* number = value.as_float()) {
      out["value"] = *number;  // non-finite values become null
    } else if (const bool* flag = std::get_if<bool>(&value.data)) {
      out["value"] = *flag;
    } else if (const List* list = value.as_list()) {
      list_node(*list, depth, out);
    } else if (const Dict* dict = value.as_dict()) {
      dict_node(*dict, depth, out);
    }
    return out;
  }

 private:
  void list_node(const List& list, std::size_t depth, Json& out) const {
    out["length"] = list.items.size();
    if (list.items.empty()) return;
    if (depth >= options_.max_depth) {
      out["truncated"] = true;
      return;
    }
    const auto variants = detail::group_elements(detail::list_elements(list));
    if (variants.size() == 1) {
      out["element"] = node(list.items.front(), depth + 1);
      if (list.items.front().as_string()) {
        Json sample = Json::array();
        for (std::size_t i = 0; i < list.items.size() && i < options_.string_samples; ++i)
          sample.push_back(truncated(*list.items[i].as_string()));
        out["sample"] = std::move(sample);
      }
      return;
    }
    if (list.items.size() <= kSmallList) {
      Json items = Json::array();
      for (const auto& item : list.items) items.push_back(node(item, depth + 1));
      out["items"] = std::move(items);
      return;
    }
    Json shown = Json::array();
    for (std::size_t i = 0; i < variants.size() && i < kShownVariants; ++i) {
      const auto& variant = variants[i];
      shown.push_back({{"count", variant.count},
                       {"first_index", variant.first_index},
                       {"signature", variant.signature},
                       {"element", node(list.items[variant.first_index], depth + 1)}});
    }
    out["variants"] = std::move(shown);
    out["variant_count"] = variants.size();
  }

  void dict_node(const Dict& dict, std::size_t depth, Json& out) const {
    out["length"] = dict.items.size();
    if (dict.items.empty()) return;
    if (depth >= options_.max_depth) {
      out["truncated"] = true;
      return;
    }
    if (dict.items.size() > options_.max_keys) {
      const auto variants = detail::group_elements(detail::dict_values(dict));
      if (variants.size() == 1) {
        Json sample = Json::array();
        for (std::size_t i = 0; i < options_.string_samples && i < dict.items.size(); ++i)
          sample.push_back(truncated(dict.items[i].first));
        out["sample"] = std::move(sample);
        out["element"] = node(dict.items.front().second, depth + 1);
        return;
      }
    }
    Json items = Json::object();
    std::size_t shown = 0;
    for (const auto& [key, item] : dict.items) {
      if (shown++ == options_.max_keys) {
        out["truncated"] = true;
        break;
      }
      items[key] = node(item, depth + 1);
    }
    out["items"] = std::move(items);
  }

  const ProbeOptions& options_;
};

Json left_out_json(const std::vector<LeftOutField>& left_out) {
  Json list = Json::array();
  for (const auto& entry : left_out)
    list.push_back({{"field", entry.field}, {"reason", entry.reason}});
  return list;
}

Json layout_json(const SourceMapping& mapping) {
  Json fields = Json::array();
  for (const auto& field : mapping.fields)
    fields.push_back({{"column", field.column}, {"path", field.path}});
  Json columns = Json::array();
  for (const auto& column : mapping.columns) {
    Json entry{{"name", column.name},
               {"kind", std::string(column_kind_name(column.kind))},
               {"role", std::string(column_role_name(column.role))},
               {"rows", column.rows},
               {"path", column.path}};
    if (column.kind != ColumnKind::text) entry["dtype"] = std::string(dtype_name(column.dtype));
    if (column.kind == ColumnKind::tensor) {
      entry["row_shape"] = column.row_shape;
      entry["dim"] = column.dim();
    }
    if (column.time)  // the manifest's column "time", as pack will record it
      entry["time"] = {{"kind", std::string(time_kind_name(column.time->kind))},
                       {"unit", std::string(time_unit_name(column.time->unit))},
                       {"tz", column.time->tz.empty() ? Json(nullptr) : Json(column.time->tz)}};
    columns.push_back(std::move(entry));
  }
  return {{"kind", std::string(source_kind_name(mapping.kind))},
          {"rows", mapping.rows},
          {"explanation", mapping.explanation},
          {"flags", format_flags(mapping.kind, mapping.fields)},
          {"fields", std::move(fields)},
          {"columns", std::move(columns)},
          {"left_out", left_out_json(mapping.left_out)},
          {"not_selected", mapping.not_selected}};
}

}  // namespace

std::string probe_json(const Value& root, const std::string& origin, const ProbeOptions& options) {
  return probe_json(InputData{.tree = root}, origin, options);
}

std::string probe_json(const InputData& data, const std::string& origin,
                       const ProbeOptions& options) {
  Json out;
  out["file"] = origin;
  if (data.columnar()) {
    out["tree"] = nullptr;
    out["arrays"] = Json::array();
    for (const auto& column : data.columns) {
      Json shape = Json::array({column.rows});
      for (std::uint64_t extent : column.row_shape) shape.push_back(extent);
      if (column.kind == ColumnKind::sequence) shape.push_back(nullptr);
      out["arrays"].push_back({{"path", column.path},
                               {"kind", std::string(column_kind_name(column.kind))},
                               {"dtype", std::string(dtype_name(column.dtype))},
                               {"shape", shape}});
    }
    out["left_out"] = left_out_json(data.left_out);
  } else {
    out["tree"] = JsonRenderer(options).node(data.tree, 0);
  }
  const auto result = detail::try_mapping(data, origin, options);
  out["layout"] = result.mapping ? layout_json(*result.mapping) : Json(nullptr);
  out["layout_error"] = result.mapping ? Json(nullptr) : Json(result.error);
  // Keys and strings come from untrusted files: replace invalid UTF-8 rather than throw.
  return out.dump(2, ' ', false, Json::error_handler_t::replace);
}

}  // namespace gpucache
