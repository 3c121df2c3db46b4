#include "gpucache/export.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard_io/shard_reader.hpp"
#include "gpucache/common/atomic_file.hpp"
#include "gpucache/common/float_convert.hpp"
#include "gpucache/error.hpp"
#include "gpucache/npy.hpp"

namespace gpucache {
namespace {

namespace fs = std::filesystem;

std::vector<std::unique_ptr<shard::ShardReader>> open_shards(const std::string& dataset,
                                                             unsigned threads) {
  std::vector<std::unique_ptr<shard::ShardReader>> shards;
  std::error_code error;
  if (!fs::is_directory(dataset, error)) {
    shards.push_back(std::make_unique<shard::ShardReader>(dataset, true, threads));
    return shards;
  }
  bool hash_ok = false;
  const auto manifest =
      shard::read_manifest((fs::path(dataset) / shard::kManifestName).string(), hash_ok);
  if (!hash_ok)
    throw Error(dataset, shard::kManifestName, "manifest hash mismatch: run gpucache verify");
  for (const auto& listed : manifest.shards)
    shards.push_back(std::make_unique<shard::ShardReader>(
        (fs::path(dataset) / listed.file).string(), true, threads));
  return shards;
}

}  // namespace

ExportResult export_npy(const std::string& dataset, const ExportOptions& options) {
  if (options.output_dir.empty()) throw UsageError("export needs an output directory");
  const auto shards = open_shards(dataset, options.threads);
  if (shards.empty()) throw Error(dataset, "", "dataset has no shards");
  const auto& columns = shards.front()->layout().columns;
  for (const auto& wanted : options.columns)
    if (!shards.front()->find_column(wanted))
      throw Error(dataset, "", "no column named '" + wanted + "'");
  std::uint64_t rows = 0;
  for (const auto& shard : shards) rows += shard->rows();
  std::error_code error;
  fs::create_directories(options.output_dir, error);
  if (error) throw Error(options.output_dir, "", "cannot create: " + error.message());

  ExportResult result;
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const auto& column = columns[c];
    if (!options.columns.empty() && std::find(options.columns.begin(), options.columns.end(),
                                              column.name) == options.columns.end())
      continue;
    ExportedFile exported;
    exported.column = column.name;
    if (column.kind == ColumnKind::text) {
      exported.path = (fs::path(options.output_dir) / (column.name + ".jsonl")).string();
      std::string text;
      for (const auto& shard : shards)
        for (std::uint64_t r = 0; r < shard->rows(); ++r)
          text += nlohmann::json(std::string(shard->text(c, r)))
                      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                  "\n";
      detail::write_file_atomic(exported.path, text);
      result.files.push_back(exported);
      continue;
    }
    // numpy has no bf16: widen it to f32, which represents every bf16 value exactly.
    const DType out_dtype = column.dtype == DType::bf16 ? DType::f32 : column.dtype;
    if (column.dtype == DType::bf16) exported.note = "bf16 widened to f32 (numpy has no bf16)";
    exported.path = (fs::path(options.output_dir) / (column.name + ".npy")).string();
    std::vector<std::uint64_t> shape{rows};
    for (std::uint64_t extent : column.row_shape) shape.push_back(extent);
    const std::uint64_t in_size = dtype_size(column.dtype);
    const std::uint64_t out_row_bytes = column.row_elements() * dtype_size(out_dtype);
    std::vector<float> widened(column.row_elements());
    write_npy(exported.path, out_dtype, shape,
              [&](std::span<std::byte> out, std::uint64_t first, std::uint64_t count) {
                std::uint64_t shard_first = 0;
                for (const auto& shard : shards) {
                  const std::uint64_t shard_end = shard_first + shard->rows();
                  for (std::uint64_t r = std::max(first, shard_first);
                       r < std::min(first + count, shard_end); ++r) {
                    const std::byte* in =
                        shard->tensor_data(c).data() + (r - shard_first) * column.row_pitch_bytes();
                    std::byte* dst = out.data() + (r - first) * out_row_bytes;
                    if (out_dtype == column.dtype) {
                      std::memcpy(dst, in, column.row_elements() * in_size);
                    } else {
                      detail::widen_to_f32(column.dtype, in, widened.data(), column.row_elements());
                      std::memcpy(dst, widened.data(), out_row_bytes);
                    }
                  }
                  shard_first = shard_end;
                }
              });
    result.files.push_back(exported);
  }
  return result;
}

std::string ExportResult::to_json() const {
  nlohmann::ordered_json json;
  json["ok"] = true;
  json["files"] = nlohmann::ordered_json::array();
  for (const auto& file : files) {
    nlohmann::ordered_json entry{{"column", file.column}, {"path", file.path}};
    if (!file.note.empty()) entry["note"] = file.note;
    json["files"].push_back(entry);
  }
  return json.dump(2);
}

std::string ExportResult::to_text() const {
  std::string text;
  for (const auto& file : files)
    text += "wrote " + file.path + (file.note.empty() ? "" : " (" + file.note + ")") + "\n";
  return text;
}

}  // namespace gpucache
