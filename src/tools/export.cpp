#include "gpucache/export.hpp"

#include <nlohmann/json.hpp>

#include "export_source.hpp"
#include "export_writers.hpp"

namespace gpucache {

std::string_view export_format_name(ExportFormat format) noexcept {
  return format == ExportFormat::npy ? "npy" : "safetensors";
}

std::optional<ExportFormat> parse_export_format(std::string_view name) noexcept {
  if (name == "npy") return ExportFormat::npy;
  if (name == "safetensors") return ExportFormat::safetensors;
  return std::nullopt;
}

ExportResult export_dataset(const std::string& dataset, const ExportOptions& options) {
  if (options.output.empty()) throw UsageError("export needs an output path");
  const detail::ExportSource source(dataset, options.columns, options.threads);
  if (options.format == ExportFormat::npy) return detail::export_npy_files(source, options.output);
  return detail::export_safetensors_file(source, options.output);
}

std::string ExportResult::to_json() const {
  nlohmann::ordered_json json;
  json["ok"] = true;
  json["format"] = std::string(export_format_name(format));
  json["output"] = output;
  json["rows"] = rows;
  json["bytes"] = bytes;
  json["files"] = nlohmann::ordered_json::array();
  for (const auto& array : arrays) {
    nlohmann::ordered_json entry{
        {"column", array.column}, {"part", array.part}, {"path", array.path}};
    if (!array.tensor.empty()) entry["tensor"] = array.tensor;
    if (!array.dtype.empty()) entry["dtype"] = array.dtype;
    entry["shape"] = array.shape;
    if (!array.note.empty()) entry["note"] = array.note;
    json["files"].push_back(entry);
  }
  return json.dump(2);
}

std::string ExportResult::to_text() const {
  auto shape_text = [](const std::vector<std::uint64_t>& shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
      text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
  };
  auto describe = [&](const ExportedArray& array) {
    std::string text = array.dtype.empty() ? std::to_string(array.shape.at(0)) + " lines"
                                           : array.dtype + " " + shape_text(array.shape);
    return array.note.empty() ? text : text + " (" + array.note + ")";
  };
  std::string text;
  if (format == ExportFormat::npy) {
    for (const auto& array : arrays) text += "wrote " + array.path + ": " + describe(array) + "\n";
    return text;
  }
  text = "wrote " + output + " (" + std::to_string(bytes) + " bytes, " + std::to_string(rows) +
         " rows):\n";
  for (const auto& array : arrays) text += "  " + array.tensor + ": " + describe(array) + "\n";
  return text;
}

}  // namespace gpucache
