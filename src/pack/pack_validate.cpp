#include "pack_validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>

#include "gpucache/common/atomic_file.hpp"
#include "gpucache/common/parallel.hpp"
#include "gpucache/error.hpp"
#include "gpucache/validation_json.hpp"

namespace gpucache::detail {
namespace {

using Json = nlohmann::ordered_json;

// Rows per validation batch, so memory stays flat: about 64 MiB of f32 per column for a GPU, which
// wants big transfers, and 4 MiB for the CPU, whose gathered rows then stay in cache.
std::uint64_t batch_rows(std::uint64_t dim, Device device) {
  const std::uint64_t bytes = device == Device::cuda ? 64ull << 20 : 4ull << 20;
  return std::max<std::uint64_t>(1, bytes / (4 * std::max<std::uint64_t>(dim, 1)));
}

// JSON has no NaN or infinity: such norms are written as strings.
Json number_or_text(double value) {
  if (std::isfinite(value)) return value;
  return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
}

std::vector<std::uint64_t> identity(std::uint64_t count) {
  std::vector<std::uint64_t> rows(count);
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

}  // namespace

std::vector<std::size_t> embedding_columns(const Source& source) {
  std::vector<std::size_t> columns;
  for (std::size_t c = 0; c < source.columns.size(); ++c)
    if (is_embedding_column(source.columns[c])) columns.push_back(c);
  return columns;
}

ValidationOptions effective_validation_options(const PackOptions& options,
                                               const std::vector<Column>& specs,
                                               const std::vector<std::size_t>& columns) {
  ValidationOptions validation = options.validation;
  validation.threads = options.threads;
  if (!columns.empty()) validation.output_dtype = specs[columns.front()].dtype;
  for (std::size_t c : columns)
    if (specs[c].dtype != validation.output_dtype)
      throw UsageError("embedding columns '" + specs[columns.front()].name + "' and '" +
                       specs[c].name + "' would be stored as different types; pass --dtype");
  return validation;
}

ValidationOutcome validate_inputs(const PackInputs& inputs, const std::vector<Column>& specs,
                                  const PackOptions& options, Progress& progress) {
  ValidationOutcome outcome;
  outcome.columns = embedding_columns(inputs.first());
  if (outcome.columns.empty()) {
    // Nothing to check (no float vectors): every row is kept, in input order.
    outcome.result.rows = identity(inputs.total_rows());
    outcome.result.rows_checked = inputs.total_rows();
    return outcome;
  }
  if (outcome.columns.size() > 2)
    throw UsageError(
        "validation checks one embedding column or a question/answer pair, but the inputs have " +
        std::to_string(outcome.columns.size()) + "; select columns with --field");
  std::vector<std::uint64_t> dims;
  for (std::size_t c : outcome.columns) dims.push_back(inputs.first().columns[c].dim());
  Validator validator(effective_validation_options(options, specs, outcome.columns), dims);
  outcome.device_description = validator.device_description();

  const std::uint64_t max_dim = *std::max_element(dims.begin(), dims.end());
  const std::uint64_t rows_per_batch = batch_rows(max_dim, validator.device());
  // Every value is overwritten by the reads: no zero-filling first.
  std::vector<std::unique_ptr<float[]>> buffers(outcome.columns.size());
  // Where each row of a batch lies, per column, when every column's rows are f32 lying apart.
  std::vector<std::vector<const std::byte*>> apart_rows(outcome.columns.size());
  std::vector<const float* const*> apart_columns(outcome.columns.size());
  auto rows_apart = [&](std::uint64_t first, std::uint64_t count) {
    if (validator.device() != Device::cpu) return false;  // a GPU takes gathered batches
    for (std::size_t k = 0; k < outcome.columns.size(); ++k) {
      apart_rows[k].resize(count);
      if (inputs.dtype(outcome.columns[k], first) != DType::f32 ||
          !inputs.row_pointers(outcome.columns[k], first, count, apart_rows[k].data()))
        return false;
      // The checks read floats: a row stored at an odd offset (a hand-made zip) is read instead.
      if (!std::all_of(apart_rows[k].begin(), apart_rows[k].end(), [](const std::byte* row) {
            return reinterpret_cast<std::uintptr_t>(row) % alignof(float) == 0;
          }))
        return false;
      apart_columns[k] = reinterpret_cast<const float* const*>(apart_rows[k].data());
    }
    return true;
  };
  // Checks rows read in place (f32 stored contiguously in a mapped input) or into the buffers;
  // true when some were read in place (release() them).
  auto check_read_rows = [&](std::uint64_t first_row, std::uint64_t count, std::uint32_t source) {
    std::vector<const float*> pointers;
    bool direct = false;
    for (std::size_t k = 0; k < outcome.columns.size(); ++k) {
      if (const float* rows = inputs.direct_f32(outcome.columns[k], first_row, count)) {
        pointers.push_back(rows);
        direct = true;
        continue;
      }
      if (!buffers[k])
        buffers[k] = std::make_unique_for_overwrite<float[]>(rows_per_batch * dims[k]);
      // Reading (page faults, strides, widening) is the slow part: split it across threads.
      const std::uint64_t piece = std::max<std::uint64_t>(1, (count + 15) / 16);
      parallel_for_each((count + piece - 1) / piece, options.threads, [&](std::uint64_t p) {
        const std::uint64_t first = p * piece, n = std::min(piece, count - first);
        inputs.read_f32(outcome.columns[k], first_row + first, n,
                        buffers[k].get() + first * dims[k]);
      });
      pointers.push_back(buffers[k].get());
    }
    validator.check_batch(pointers.data(), first_row, count, source);
    return direct;
  };
  std::uint64_t global = 0;
  for (std::uint32_t s = 0; s < inputs.sources().size(); ++s) {
    const std::uint64_t source_end = global + inputs.sources()[s].rows;
    while (global < source_end) {
      const std::uint64_t count = std::min(rows_per_batch, source_end - global);
      bool direct = false;
      if (rows_apart(global, count))
        // f32 rows lying apart (a tensor each) are checked where they lie, not gathered first.
        validator.check_rows(apart_columns.data(), global, count, s);
      else
        direct = check_read_rows(global, count, s);
      if (direct)
        for (std::size_t k = 0; k < outcome.columns.size(); ++k)
          inputs.release(outcome.columns[k], global, count);
      std::uint64_t bytes = 0;
      for (std::size_t k = 0; k < dims.size(); ++k) bytes += count * dims[k] * 4;
      progress.advance(bytes);
      global += count;
    }
  }
  outcome.result =
      validator.finish([&](std::uint64_t row, std::size_t column, std::span<float> out) {
        inputs.read_f32(outcome.columns[column], row, 1, out.data());
      });
  return outcome;
}

void add_validation_sections(shard::Manifest& manifest, const ValidationOutcome& outcome,
                             const PackInputs& inputs) {
  const auto& result = outcome.result;
  Json columns = Json::array();
  for (std::size_t c : outcome.columns) columns.push_back(inputs.first().columns[c].name);
  manifest.sections["validated_columns"] = columns;
  manifest.sections["rows_checked"] = result.rows_checked;
  manifest.sections["dropped"] = reason_counts_to_json(result.reasons);
  manifest.sections["sampled_out"] = result.sampled_out;
  manifest.sections["clamped_rows"] = result.rows_clamped;
  Json sources = Json::array();
  for (const auto& report : result.sources)
    sources.push_back({{"input", report.source},
                       {"path", inputs.sources()[report.source].path},
                       {"rows", report.rows},
                       {"kept", report.reasons[static_cast<std::size_t>(DropReason::kept)]},
                       {"dropped", reason_counts_to_json(report.reasons)},
                       {"sampled_out", report.sampled_out}});
  manifest.sections["sources"] = sources;
  Json norms = Json::object();
  for (std::size_t k = 0; k < result.norms.size() && k < outcome.columns.size(); ++k) {
    const auto& stats = result.norms[k];
    norms[inputs.first().columns[outcome.columns[k]].name] = {
        {"count", stats.count},
        {"min", stats.min},
        {"max", stats.max},
        {"mean", stats.mean},
        {"histogram", {{"edges", stats.bin_edges}, {"counts", stats.bin_counts}}}};
  }
  manifest.sections["norm_stats"] = norms;
}

void write_rejects(const std::string& path, const ValidationOutcome& outcome,
                   const PackInputs& inputs) {
  std::string text;
  for (const auto& reject : outcome.result.rejects) {
    Json line;
    line["source"] = inputs.sources()[reject.source].path;
    line["row"] = inputs.sources()[reject.source].row_offset + reject.source_row;
    line["reason"] = drop_reason_name(reject.reason);
    if (reject.column < outcome.columns.size())
      line["column"] = inputs.first().columns[outcome.columns[reject.column]].name;
    line["norm"] = number_or_text(reject.norm);
    if (reject.reason == DropReason::pair_cos)
      line["pair_cosine"] = number_or_text(reject.pair_cosine);
    text += line.dump() + "\n";
  }
  write_file_atomic(path, text);
}

}  // namespace gpucache::detail
