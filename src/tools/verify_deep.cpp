#include "verify_deep.hpp"

#include <cmath>
#include <filesystem>
#include <memory>

#include "gpucache/shard_io/shard_reader.hpp"
#include "gpucache/common/float_convert.hpp"
#include "gpucache/error.hpp"
#include "gpucache/validate.hpp"

namespace gpucache::detail {
namespace {

namespace fs = std::filesystem;

// Relative error a stored value may carry from rounding to its storage type, with a margin: the
// rules were checked on f32 values before conversion.
double storage_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return std::ldexp(1.0, -9);
    case DType::bf16:
      return std::ldexp(1.0, -6);
    default:
      return 1e-6;
  }
}

double optional_number(const nlohmann::ordered_json& json, const char* key, double fallback) {
  return json.contains(key) && json[key].is_number() ? json[key].get<double>() : fallback;
}

}  // namespace

void check_recorded_rules(const std::string& dataset_dir, const shard::Manifest& manifest,
                          const VerifyOptions& options, std::vector<Problem>& problems) {
  if (!manifest.sections.contains("validated_columns") || !manifest.options.contains("validation"))
    return;
  const auto& rules_json = manifest.options["validation"];
  std::vector<std::size_t> columns;
  for (const auto& name : manifest.sections["validated_columns"])
    for (std::size_t c = 0; c < manifest.columns.size(); ++c)
      if (manifest.columns[c].name == name.get<std::string>()) columns.push_back(c);
  if (columns.empty() || manifest.rows == 0) return;

  const DType stored = manifest.columns[columns.front()].dtype;
  const double tolerance = storage_tolerance(stored);
  ValidationOptions rules;
  rules.device = options.device;
  rules.threads = options.threads;
  if (rules_json.value("normalize", false)) {
    rules.norm_min = 1.0 - 4 * tolerance;
    rules.norm_max = 1.0 + 4 * tolerance;
  } else {
    rules.norm_min = optional_number(rules_json, "norm_min", 0.1) * (1.0 - tolerance);
    rules.norm_max = optional_number(rules_json, "norm_max", 100.0) * (1.0 + tolerance);
  }
  // Rounding to f16/bf16 can make distinct rows equal, so duplicates are re-checked only in f32.
  rules.dedup = rules_json.value("dedup", false) && stored == DType::f32;
  if (rules_json.contains("pair_cos_min") && rules_json["pair_cos_min"].is_number())
    rules.pair_cos_min = rules_json["pair_cos_min"].get<double>() - 4 * tolerance;
  if (rules_json.contains("pair_cos_max") && rules_json["pair_cos_max"].is_number())
    rules.pair_cos_max = rules_json["pair_cos_max"].get<double>() + 4 * tolerance;

  std::vector<std::unique_ptr<shard::ShardReader>> shards;
  try {
    for (const auto& listed : manifest.shards)
      shards.push_back(std::make_unique<shard::ShardReader>(
          (fs::path(dataset_dir) / listed.file).string(), false));
  } catch (const Error& error) {
    problems.push_back({error.file(), error.location(), error.cause(), std::nullopt, std::nullopt});
    return;
  }
  std::vector<std::uint64_t> dims;
  for (std::size_t c : columns) dims.push_back(manifest.columns[c].dim());
  Validator validator(rules, dims);
  auto read_rows = [&](const shard::ShardReader& reader, std::size_t column, std::uint64_t first,
                       std::uint64_t count, float* out) {
    const auto& entry = reader.layout().columns[column];
    const auto data = reader.tensor_data(column);
    for (std::uint64_t r = 0; r < count; ++r)
      widen_to_f32(entry.dtype, data.data() + (first + r) * entry.row_pitch_bytes(),
                   out + r * entry.dim(), entry.dim());
  };
  std::vector<std::vector<float>> buffers(columns.size());
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const auto& reader = *shards[s];
    const std::uint64_t batch = std::max<std::uint64_t>(1, (64ull << 20) / (4 * dims.front()));
    for (std::uint64_t first = 0; first < reader.rows(); first += batch) {
      const std::uint64_t count = std::min(batch, reader.rows() - first);
      std::vector<const float*> pointers;
      for (std::size_t k = 0; k < columns.size(); ++k) {
        buffers[k].resize(count * dims[k]);
        read_rows(reader, columns[k], first, count, buffers[k].data());
        pointers.push_back(buffers[k].data());
      }
      validator.check_batch(pointers.data(), manifest.shards[s].first_row + first, count, 0);
    }
  }
  auto shard_of = [&](std::uint64_t row) {
    std::size_t s = 0;
    while (s + 1 < manifest.shards.size() && manifest.shards[s + 1].first_row <= row) ++s;
    return s;
  };
  const auto result =
      validator.finish([&](std::uint64_t row, std::size_t column, std::span<float> out) {
        const std::size_t s = shard_of(row);
        read_rows(*shards[s], columns[column], row - manifest.shards[s].first_row, 1, out.data());
      });
  for (const auto& reject : result.rejects) {
    const std::size_t s = shard_of(reject.row);
    const std::uint64_t row = reject.row - manifest.shards[s].first_row;
    const auto& column =
        manifest.columns[columns[std::min<std::size_t>(reject.column, columns.size() - 1)]];
    char norm[64];
    std::snprintf(norm, sizeof norm, "%.6g", reject.norm);
    problems.push_back(
        {manifest.shards[s].file, "column '" + column.name + "' row " + std::to_string(row),
         "breaks the recorded rule: " + std::string(drop_reason_name(reject.reason)) + " (norm " +
             norm + ")",
         std::nullopt, std::nullopt});
  }
}

}  // namespace gpucache::detail
