#include "gpucache/export.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "gpucache/error.hpp"
#include "gpucache/remote/remote.hpp"
#include "gpucache/shard/dataset_files.hpp"

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

namespace {

namespace fs = std::filesystem;

// Files exported into a dataset's folder would sit among its shards (and a later pack --force
// would delete what it does not know), so the folder the files go to must not hold a dataset.
void refuse_dataset_folder(const ExportOptions& options) {
  std::error_code error;
  fs::path folder = options.output;
  if (options.format == ExportFormat::safetensors && options.output.back() != '/' &&
      !fs::is_directory(folder, error))
    folder = folder.parent_path();
  if (folder.empty()) folder = ".";
  if (!fs::is_directory(folder, error)) return;
  for (const auto& entry : fs::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (shard::is_dataset_file(name) && !shard::is_temporary_name(name))
      throw Error(options.output, "",
                  "the folder " + folder.string() + " holds a gpucache dataset ('" + name +
                      "'); export into another folder");
  }
}

}  // namespace

ExportResult export_dataset(const std::string& dataset, const ExportOptions& options) {
  if (options.output.empty()) throw UsageError("export needs an output path");
  refuse_dataset_folder(options);
  if (remote::is_remote_path(dataset)) {  // the shards into the cache (GPUCACHE_CACHE), then local
    const auto copy = remote::RemoteDataset::open(dataset, {});
    copy->fetch_all();
    return export_dataset(copy->local_dir(), options);
  }
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
