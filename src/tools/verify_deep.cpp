#include "verify_deep.hpp"

#include <cmath>
#include <filesystem>
#include <memory>

#include "gpucache/common/float_convert.hpp"
#include "gpucache/error.hpp"
#include "gpucache/shard_io/shard_reader.hpp"
#include "gpucache/validate.hpp"
#include "gpucache/validation_json.hpp"

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

// "norm_low (the L2 norm is below norm_min; norm 0.0123)": the reason as kDropReasons names and
// documents it, with the value that broke it.
std::string broken_rule(const RejectedRow& reject) {
  const bool cosine = reject.reason == DropReason::pair_cos;
  char value[64];
  std::snprintf(value, sizeof value, "%s %.6g", cosine ? "cosine" : "norm",
                cosine ? reject.pair_cosine : reject.norm);
  const DropReasonInfo& info = drop_reason_info(reject.reason);
  return std::string(info.name) + " (" + std::string(info.doc) + "; " + value + ")";
}

}  // namespace

ValidationOptions deep_check_rules(const ValidationOptions& recorded, DType stored,
                                   const VerifyOptions& options) {
  const double tolerance = storage_tolerance(stored);
  ValidationOptions rules;
  rules.device = options.device;
  rules.threads = options.threads;
  if (recorded.normalize) {
    rules.norm_min = 1.0 - 4 * tolerance;
    rules.norm_max = 1.0 + 4 * tolerance;
  } else {
    rules.norm_min = recorded.norm_min * (1.0 - tolerance);
    rules.norm_max = recorded.norm_max * (1.0 + tolerance);
  }
  // Rounding to f16/bf16 can make distinct rows equal, so duplicates are re-checked only in f32.
  rules.dedup = recorded.dedup && stored == DType::f32;
  if (recorded.pair_cos_min) rules.pair_cos_min = *recorded.pair_cos_min - 4 * tolerance;
  if (recorded.pair_cos_max) rules.pair_cos_max = *recorded.pair_cos_max + 4 * tolerance;
  return rules;
}

void check_recorded_rules(const std::string& dataset_dir, const shard::Manifest& manifest,
                          const VerifyOptions& options, std::vector<Problem>& problems) {
  if (!manifest.sections.contains("validated_columns") || !manifest.options.contains("validation"))
    return;
  std::vector<std::size_t> columns;
  for (const auto& name : manifest.sections["validated_columns"])
    for (std::size_t c = 0; c < manifest.columns.size(); ++c)
      if (manifest.columns[c].name == name.get<std::string>()) columns.push_back(c);
  if (columns.empty() || manifest.rows == 0) return;

  ValidationOptions recorded;
  try {
    recorded = validation_options_from_json(manifest.options["validation"], shard::kManifestName);
  } catch (const Error& error) {
    problems.push_back({error.file(), error.location(), error.cause(), std::nullopt, std::nullopt});
    return;
  }
  const ValidationOptions rules =
      deep_check_rules(recorded, manifest.columns[columns.front()].dtype, options);

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
    problems.push_back(
        {manifest.shards[s].file, "column '" + column.name + "' row " + std::to_string(row),
         "breaks the recorded rule: " + broken_rule(reject), std::nullopt, std::nullopt});
  }
}

}  // namespace gpucache::detail
