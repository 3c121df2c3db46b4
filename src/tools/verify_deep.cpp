#include "verify_deep.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/common/float_convert.hpp"
#include "gpucache/error.hpp"
#include "gpucache/shard_io/shard_reader.hpp"
#include "gpucache/validate.hpp"
#include "gpucache/validation_json.hpp"

namespace gpucache::detail {
namespace {

namespace fs = std::filesystem;

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

ValidationOptions deep_check_rules(const ValidationOptions& recorded,
                                   const std::vector<ColumnChecks>& checks,
                                   const std::vector<DType>& stored, const VerifyOptions& options) {
  ValidationOptions rules;
  rules.device = options.device;
  rules.threads = options.threads;
  rules.columns.emplace();
  double pair_tolerance = 0.0;
  for (std::size_t k = 0; k < checks.size(); ++k) {
    const double tolerance = dtype_rounding_tolerance(stored[k]);
    ColumnChecks column = checks[k];
    if (column.normalized) {
      column.norm_min = 1.0 - 4 * tolerance;
      column.norm_max = 1.0 + 4 * tolerance;
    } else {
      column.norm_min *= 1.0 - tolerance;
      column.norm_max *= 1.0 + tolerance;
    }
    // Rounding to f16/bf16 can make distinct rows equal, so duplicates are re-checked only in f32.
    if (stored[k] != DType::f32) column.checks.remove(Check::dedup);
    if (column.checks.has(Check::pair_cos)) pair_tolerance = std::max(pair_tolerance, tolerance);
    column.normalized = false;  // nothing is converted
    rules.columns->push_back(std::move(column));
  }
  if (recorded.pair_cos_min) rules.pair_cos_min = *recorded.pair_cos_min - 4 * pair_tolerance;
  if (recorded.pair_cos_max) rules.pair_cos_max = *recorded.pair_cos_max + 4 * pair_tolerance;
  return rules;
}

void check_recorded_rules(const std::string& dataset_dir, const shard::Manifest& manifest,
                          const VerifyOptions& options, std::vector<Problem>& problems) {
  if (!manifest.sections.contains("validated_columns") || !manifest.options.contains("validation"))
    return;
  auto manifest_problem = [&](const Error& error) {
    problems.push_back({error.file(), error.location(), error.cause(), std::nullopt, std::nullopt});
  };
  std::vector<ColumnChecks> recorded_checks;
  ValidationOptions recorded;
  try {
    std::vector<std::string> validated;
    for (const auto& name : manifest.sections["validated_columns"]) {
      if (!name.is_string())
        throw Error(shard::kManifestName, "validated_columns",
                    "expected column names, got " + name.dump());
      validated.push_back(name.get<std::string>());
    }
    recorded = validation_options_from_json(manifest.options["validation"], shard::kManifestName);
    recorded_checks = resolve_column_checks(recorded, validated);
  } catch (const Error& error) {
    manifest_problem(error);
    return;
  }
  // The checked columns, in dataset order as pack checked them.
  std::vector<std::size_t> columns;
  std::vector<ColumnChecks> checks;
  std::vector<DType> stored;
  for (const auto& column_checks : recorded_checks) {
    if (column_checks.checks.empty()) continue;
    std::size_t c = 0;
    while (c < manifest.columns.size() && manifest.columns[c].name != column_checks.column) ++c;
    if (c == manifest.columns.size() || manifest.columns[c].kind != ColumnKind::tensor ||
        !detail::widens_to_f32(manifest.columns[c].dtype)) {
      problems.push_back({std::string(shard::kManifestName), "options.validation",
                          "checks are recorded for column '" + column_checks.column +
                              "', which the dataset has no float tensor column of",
                          std::nullopt, std::nullopt});
      return;
    }
    columns.push_back(c);
    checks.push_back(column_checks);
    stored.push_back(manifest.columns[c].dtype);
  }
  if (columns.empty() || manifest.rows == 0) return;
  std::vector<ColumnLayout> layouts;
  // An f64 column is checked on its f64 values, as pack checked it (InputType::f64_kept); the
  // others on their values widened to f32, as stored.
  for (std::size_t c : columns)
    layouts.emplace_back(manifest.columns[c].row_elements(),
                         manifest.columns[c].dtype == DType::f64 ? DType::f64 : DType::f32);

  std::vector<std::unique_ptr<shard::ShardReader>> shards;
  try {
    for (const auto& listed : manifest.shards)
      shards.push_back(std::make_unique<shard::ShardReader>(
          (fs::path(dataset_dir) / listed.file).string(), false));
  } catch (const Error& error) {
    manifest_problem(error);
    return;
  }
  std::optional<Validator> validator;
  try {
    validator.emplace(deep_check_rules(recorded, checks, stored, options), layouts);
  } catch (const Error& error) {
    // Recorded rules no Validator accepts (bounds the wrong way round, say).
    problems.push_back({std::string(shard::kManifestName), "options.validation", error.cause(),
                        std::nullopt, std::nullopt});
    return;
  }
  // Rows of `count` values as stored, without the padding of padded columns.
  auto stored_rows = [&](const shard::ShardReader& reader, std::size_t column, std::uint64_t first,
                         std::uint64_t count, std::vector<std::byte>& buffer) -> const std::byte* {
    const auto& entry = reader.layout().columns[column];
    const auto data = reader.tensor_data(column);
    const std::uint64_t pitch = entry.row_pitch_bytes();
    if (!entry.padded()) return data.data() + first * pitch;
    const std::uint64_t row_bytes = entry.row_elements() * dtype_size(entry.dtype);
    buffer.resize(count * row_bytes);
    for (std::uint64_t r = 0; r < count; ++r)
      std::memcpy(buffer.data() + r * row_bytes, data.data() + (first + r) * pitch, row_bytes);
    return buffer.data();
  };
  std::uint64_t row_bytes = 0;
  for (const auto& layout : layouts) row_bytes += 8 * layout.values;
  const std::uint64_t batch = std::max<std::uint64_t>(1, (64ull << 20) / row_bytes);
  std::vector<std::vector<std::byte>> buffers(columns.size());
  std::vector<ColumnBatch> batches(columns.size());
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const auto& reader = *shards[s];
    for (std::uint64_t first = 0; first < reader.rows(); first += batch) {
      const std::uint64_t count = std::min(batch, reader.rows() - first);
      for (std::size_t k = 0; k < columns.size(); ++k)
        batches[k] = {stored_rows(reader, columns[k], first, count, buffers[k]), stored[k]};
      validator->check_batch(batches, manifest.shards[s].first_row + first, count, 0);
    }
  }
  auto shard_of = [&](std::uint64_t row) {
    std::size_t s = 0;
    while (s + 1 < manifest.shards.size() && manifest.shards[s + 1].first_row <= row) ++s;
    return s;
  };
  const auto result =
      validator->finish([&](std::uint64_t row, std::size_t column, std::span<float> out) {
        const std::size_t s = shard_of(row);
        std::vector<std::byte> buffer;
        const std::byte* values =
            stored_rows(*shards[s], columns[column], row - manifest.shards[s].first_row, 1, buffer);
        widen_to_f32(stored[column], values, out.data(), out.size());
      });
  for (const auto& reject : result.rejects) {
    const std::size_t s = shard_of(reject.row);
    const std::uint64_t row = reject.row - manifest.shards[s].first_row;
    const auto& column = manifest.columns[columns[reject.column]];
    problems.push_back(
        {manifest.shards[s].file, "column '" + column.name + "' row " + std::to_string(row),
         "breaks the recorded rule: " + broken_rule(reject), std::nullopt, std::nullopt});
  }
}

}  // namespace gpucache::detail
