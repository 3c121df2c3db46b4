#include "pack_validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <sstream>

#include "gpucache/common/atomic_file.hpp"
#include "gpucache/common/parallel.hpp"
#include "gpucache/error.hpp"
#include "gpucache/validation_json.hpp"
#include "output_dir.hpp"

namespace gpucache::detail {
namespace {

using Json = nlohmann::ordered_json;

// Rows per validation batch, so memory stays flat: about 64 MiB of rows for a GPU, which wants
// big transfers, and 4 MiB for the CPU, whose gathered rows then stay in cache.
std::uint64_t batch_rows(std::uint64_t row_bytes, Device device) {
  const std::uint64_t bytes = device == Device::cuda ? 64ull << 20 : 4ull << 20;
  return std::max<std::uint64_t>(1, bytes / std::max<std::uint64_t>(row_bytes, 1));
}

// JSON has no NaN or infinity: such norms are written as strings.
Json number_or_text(double value) {
  if (std::isfinite(value)) return value;
  return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
}

RowList identity(std::uint64_t count, const SpillPolicy& spill) {
  RowList rows(spill);
  rows.resize(count);
  constexpr std::uint64_t kWindow = std::uint64_t(1) << 20;
  for (std::uint64_t first = 0; first < count; first += kWindow) {
    const std::uint64_t end = std::min(count, first + kWindow);
    std::iota(rows.begin() + first, rows.begin() + end, first);
    rows.release(first, end - first);
  }
  return rows;
}

// The float types the Validator reads.
bool checkable(DType dtype) {
  return float_storage_dtype(dtype);
}

std::string column_list(const Source& source) {
  std::string names;
  for (const auto& column : source.columns) names += (names.empty() ? "" : ", ") + column.name;
  return names;
}

std::string bound_text(const std::optional<double>& bound) {
  if (!bound) return "";
  std::ostringstream text;
  text << *bound;
  return text.str();
}

// "--checks 'images=finite,norm:0:inf'", as the user typed it, for messages.
std::string spec_text(const ChecksSpec& spec) {
  std::string list;
  for (const auto& info : kChecks) {
    if (!spec.checks.has(info.check)) continue;
    list += (list.empty() ? "" : ",") + std::string(info.name);
    if (info.check == Check::norm && (spec.norm_min || spec.norm_max))
      list += ":" + bound_text(spec.norm_min) + ":" + bound_text(spec.norm_max);
  }
  return "--checks '" + spec.column + "=" + (list.empty() ? "none" : list) + "'";
}

// Stored as f16 or bf16 from another type in some input, and not at unit norm: may overflow.
bool may_overflow(const PackInputs& inputs, std::size_t c, DType stored, bool normalized) {
  if ((stored != DType::f16 && stored != DType::bf16) || normalized) return false;
  return std::any_of(inputs.sources().begin(), inputs.sources().end(), [&](const Source& source) {
    return checkable(source.columns[c].dtype) && source.columns[c].dtype != stored;
  });
}

// Rows with a null in some packed column, by global row, each with its first such column; or,
// with --on-null error, the refusal of the first (in input order, then column order).
std::vector<NullRow> null_rows(const PackInputs& inputs, NullPolicy policy) {
  std::vector<NullRow> rows;
  std::uint64_t start = 0;
  for (const Source& source : inputs.sources()) {
    std::vector<NullRow> own;
    for (std::size_t c = 0; c < source.columns.size(); ++c)
      for (const std::uint64_t row : source.columns[c].null_rows)
        if (row < source.rows) own.push_back({row, static_cast<std::uint32_t>(c)});
    if (!own.empty()) {
      // The first null column of each row (the sort puts it first among the row's entries).
      std::sort(own.begin(), own.end(), [](const NullRow& a, const NullRow& b) {
        return a.row != b.row ? a.row < b.row : a.column < b.column;
      });
      own.erase(std::unique(own.begin(), own.end(),
                            [](const NullRow& a, const NullRow& b) { return a.row == b.row; }),
                own.end());
      if (policy == NullPolicy::error) {
        const NullRow& first = own.front();
        throw Error(source.path,
                    "column '" + source.columns[first.column].name + "' row " +
                        std::to_string(source.row_offset + first.row),
                    "is null (--on-null error; drop such rows with --on-null drop, the default, "
                    "or fill the nulls first)");
      }
      for (NullRow& row : own) rows.push_back({start + row.row, row.column});
    }
    start += source.rows;
  }
  return rows;
}

}  // namespace

std::vector<std::size_t> embedding_columns(const Source& source) {
  std::vector<std::size_t> columns;
  for (std::size_t c = 0; c < source.columns.size(); ++c)
    if (is_embedding_column(source.columns[c])) columns.push_back(c);
  return columns;
}

ValidationPlan plan_validation(const PackInputs& inputs, const std::vector<Column>& specs,
                               const PackOptions& options) {
  const ValidationOptions& given = options.validation;
  const Source& first = inputs.first();
  const bool pair_bounds = given.pair_cos_min || given.pair_cos_max;
  if (options.no_checks && !options.checks.empty())
    throw UsageError("--no-checks turns every check off; it cannot be combined with --checks");
  if (options.no_checks && given.dedup)
    throw UsageError(
        "--dedup adds the dedup check, which --no-checks turns off; use --checks "
        "COLUMN=dedup for the columns to deduplicate");
  if (options.no_checks && pair_bounds)
    throw UsageError(
        "--pair-cos-min/--pair-cos-max need the pair_cos check, which --no-checks "
        "turns off");
  // Each --checks names one column of the inputs, once.
  std::vector<const ChecksSpec*> given_checks(first.columns.size(), nullptr);
  for (const auto& spec : options.checks) {
    std::size_t c = 0;
    while (c < first.columns.size() && first.columns[c].name != spec.column) ++c;
    if (c == first.columns.size())
      throw UsageError(spec_text(spec) + ": there is no column '" + spec.column +
                       "'; the columns are " + column_list(first));
    if (given_checks[c]) throw UsageError("--checks names column '" + spec.column + "' twice");
    given_checks[c] = &spec;
    for (const auto& info : kChecks)
      if (spec.checks.has(info.check)) {
        const InputColumn& column = first.columns[c];
        const std::string refusal =
            check_refusal(info.check, column.name, column.role, column.dtype);
        if (!refusal.empty()) throw UsageError(spec_text(spec) + ": " + refusal);
      }
  }

  std::vector<ColumnChecks> checks(first.columns.size());
  for (std::size_t c = 0; c < first.columns.size(); ++c) {
    const InputColumn& column = first.columns[c];
    ColumnChecks& column_checks = checks[c];
    column_checks.column = column.name;
    column_checks.normalized = given.normalize && is_embedding_column(column);
    column_checks.norm_min = given.norm_min;
    column_checks.norm_max = given.norm_max;
    if (const ChecksSpec* spec = given_checks[c]) {
      column_checks.checks = spec->checks;
      column_checks.norm_min = spec->norm_min.value_or(given.norm_min);
      column_checks.norm_max = spec->norm_max.value_or(given.norm_max);
    } else if (!options.no_checks) {
      column_checks.checks = default_checks(column.role, column.dtype, given.dedup);
    }
  }
  // The dialogue pair: the two embedding columns, unless --checks chose their checks.
  const auto embeddings = embedding_columns(first);
  if (pair_bounds && embeddings.size() == 2)
    for (std::size_t c : embeddings)
      if (!given_checks[c]) checks[c].checks.add(Check::pair_cos);
  std::vector<std::size_t> pair;
  for (std::size_t c = 0; c < checks.size(); ++c)
    if (checks[c].checks.has(Check::pair_cos)) pair.push_back(c);
  if (!pair.empty() && !pair_bounds)
    throw UsageError("the pair_cos check of --checks needs --pair-cos-min or --pair-cos-max");
  if (pair_bounds && pair.size() != 2)
    throw UsageError(
        "--pair-cos-min/--pair-cos-max check the cosine of two columns (a dialogue's "
        "question and answer embeddings, or two with pair_cos in --checks), but " +
        std::to_string(pair.size()) + " have the pair_cos check");
  if (pair.size() == 2 &&
      first.columns[pair[0]].row_elements() != first.columns[pair[1]].row_elements())
    throw UsageError(
        "pair_cos needs two columns of the same values per row; '" + first.columns[pair[0]].name +
        "' has " + std::to_string(first.columns[pair[0]].row_elements()) + " and '" +
        first.columns[pair[1]].name + "' " + std::to_string(first.columns[pair[1]].row_elements()));
  for (std::size_t c = 0; c < checks.size(); ++c) {
    const ColumnChecks& column = checks[c];
    if (column.checks.has(Check::norm) &&
        !(column.norm_min >= 0.0 && column.norm_max > 0.0 && column.norm_min <= column.norm_max))
      throw UsageError((given_checks[c] ? spec_text(*given_checks[c]) : "--norm-min/--norm-max") +
                       ": the norm bounds of '" + column.column +
                       "' need 0 <= MIN <= MAX and 0 < MAX (0 and inf are open bounds), got " +
                       bound_text(column.norm_min) + " and " + bound_text(column.norm_max));
  }

  ValidationPlan plan;
  plan.every_column = checks;
  plan.rules = given;
  plan.rules.threads = options.threads;
  plan.rules.columns.emplace();
  for (std::size_t c = 0; c < checks.size(); ++c) {
    const InputColumn& column = first.columns[c];
    const bool overflow = column.kind == ColumnKind::tensor && dtype_is_float(column.dtype) &&
                          may_overflow(inputs, c, specs[c].dtype, checks[c].normalized);
    if (checks[c].checks.empty() && !overflow) continue;
    plan.columns.push_back(c);
    plan.layouts.emplace_back(column.row_elements(), specs[c].dtype);
    plan.rules.columns->push_back(checks[c]);
  }
  plan.runs =
      !plan.columns.empty() || given.sample_fraction || given.max_rows_per_source || given.shuffle;
  return plan;
}

ValidationOptions recorded_rules(const ValidationPlan& plan) {
  ValidationOptions recorded = plan.rules;
  recorded.columns = plan.every_column;
  return recorded;
}

ValidationOutcome validate_inputs(const PackInputs& inputs, const std::vector<Column>& specs,
                                  const PackOptions& options, Progress& progress) {
  ValidationOutcome outcome;
  outcome.columns = embedding_columns(inputs.first());
  outcome.plan = plan_validation(inputs, specs, options);
  const ValidationPlan& plan = outcome.plan;
  const SpillPolicy spill = row_spill_policy(options.output_dir);
  std::vector<NullRow> nulls = null_rows(inputs, options.on_null);
  if (!plan.runs && nulls.empty()) {
    // Nothing to check, sample or shuffle: every row is kept, in input order.
    outcome.result.rows = identity(inputs.total_rows(), spill);
    outcome.result.rows_checked = inputs.total_rows();
    return outcome;
  }
  Validator validator(plan.rules, plan.layouts);
  validator.spill_to(spill.directory, spill.heap_limit_bytes);
  validator.drop_null_rows(std::move(nulls));
  outcome.device_description = validator.device_description();

  const std::size_t count_columns = plan.columns.size();
  std::uint64_t widest_row = 0;  // bytes of one row over every column, at 8 bytes a value
  for (const auto& layout : plan.layouts) widest_row += 8 * layout.values;
  const std::uint64_t rows_per_batch = batch_rows(widest_row, validator.device());
  // Every value is overwritten by the reads: no zero-filling first.
  std::vector<std::unique_ptr<std::byte[]>> buffers(count_columns);
  // Where each row of a batch lies, per column, when the CPU checks rows where they lie.
  std::vector<std::vector<const std::byte*>> row_pointers(count_columns);
  std::vector<ColumnBatch> batches(count_columns);
  std::vector<ColumnRowPointers> apart(count_columns);
  auto read_batch = [&](std::uint64_t first_row, std::uint64_t count, std::uint32_t source) {
    bool any_apart = false;
    std::vector<bool> in_place(count_columns, false);
    for (std::size_t k = 0; k < count_columns; ++k) {
      const std::size_t column = plan.columns[k];
      const DType dtype = inputs.dtype(column, first_row);
      const std::size_t size = dtype_size(dtype);
      const std::uint64_t row_bytes = plan.layouts[k].values * size;
      auto aligned = [size](const std::byte* at) {
        return reinterpret_cast<std::uintptr_t>(at) % size == 0;
      };
      // Rows stored contiguously in a mapped input are checked where they lie.
      if (const std::byte* rows = inputs.direct_rows(column, first_row, count);
          rows && aligned(rows)) {
        batches[k] = {rows, dtype};
        // A CUDA tensor's rows are also on its GPU: the CUDA backend checks them there when it
        // runs on that GPU, and uploads the host rows otherwise.
        if (validator.device() == Device::cuda)
          batches[k].device_rows =
              inputs.device_rows(column, first_row, count, &batches[k].device_ordinal);
        in_place[k] = true;
        continue;
      }
      // Rows lying apart (a tensor each) are checked where they lie by the CPU; a GPU takes
      // gathered batches.
      row_pointers[k].resize(count);
      if (validator.device() == Device::cpu &&
          inputs.row_pointers(column, first_row, count, row_pointers[k].data()) &&
          std::all_of(row_pointers[k].begin(), row_pointers[k].end(), aligned)) {
        apart[k] = {reinterpret_cast<const void* const*>(row_pointers[k].data()), dtype};
        batches[k] = {nullptr, dtype};
        any_apart = true;
        continue;
      }
      if (!buffers[k])
        buffers[k] = std::make_unique_for_overwrite<std::byte[]>(rows_per_batch * 8 *
                                                                 plan.layouts[k].values);
      // Reading (page faults, strides) is the slow part: split it across threads.
      const std::uint64_t piece = std::max<std::uint64_t>(1, (count + 15) / 16);
      parallel_for_each((count + piece - 1) / piece, options.threads, [&](std::uint64_t p) {
        const std::uint64_t first = p * piece, n = std::min(piece, count - first);
        inputs.read_raw(column, first_row + first, n, buffers[k].get() + first * row_bytes);
      });
      batches[k] = {buffers[k].get(), dtype};
    }
    if (any_apart) {
      // Some columns lie apart: every column goes as row pointers.
      for (std::size_t k = 0; k < count_columns; ++k) {
        if (!batches[k].rows) continue;
        row_pointers[k].resize(count);
        const std::uint64_t row_bytes = plan.layouts[k].values * dtype_size(batches[k].dtype);
        for (std::uint64_t r = 0; r < count; ++r)
          row_pointers[k][r] = static_cast<const std::byte*>(batches[k].rows) + r * row_bytes;
        apart[k] = {reinterpret_cast<const void* const*>(row_pointers[k].data()), batches[k].dtype};
      }
      validator.check_rows(apart, first_row, count, source);
    } else {
      validator.check_batch(batches, first_row, count, source);
    }
    for (std::size_t k = 0; k < count_columns; ++k)
      if (in_place[k]) inputs.release(plan.columns[k], first_row, count);
  };
  std::uint64_t global = 0;
  for (std::uint32_t s = 0; s < inputs.sources().size(); ++s) {
    const std::uint64_t source_end = global + inputs.sources()[s].rows;
    while (global < source_end) {
      const std::uint64_t count = std::min(rows_per_batch, source_end - global);
      read_batch(global, count, s);
      std::uint64_t bytes = 0;
      for (std::size_t k = 0; k < count_columns; ++k)
        bytes += count * plan.layouts[k].values * dtype_size(batches[k].dtype);
      progress.advance(bytes);
      global += count;
    }
  }
  outcome.result =
      validator.finish([&](std::uint64_t row, std::size_t column, std::span<float> out) {
        inputs.read_f32(plan.columns[column], row, 1, out.data());
      });
  return outcome;
}

void add_validation_sections(shard::Manifest& manifest, const ValidationOutcome& outcome,
                             const PackInputs& inputs) {
  const auto& result = outcome.result;
  const ValidationPlan& plan = outcome.plan;
  auto name_of = [&](std::size_t k) { return inputs.first().columns[plan.columns[k]].name; };
  Json columns = Json::array();
  for (std::size_t k = 0; k < plan.columns.size(); ++k)
    if (plan.checked(k)) columns.push_back(name_of(k));
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
  for (const auto& stats : result.norms)
    norms[name_of(stats.column)] = {
        {"count", stats.count},
        {"min", stats.min},
        {"max", stats.max},
        {"mean", stats.mean},
        {"histogram", {{"edges", stats.bin_edges}, {"counts", stats.bin_counts}}}};
  manifest.sections["norm_stats"] = norms;
  // Per column, the rows holding a null in it (a row null in two columns counts in both; the
  // "dropped" count of `null` counts each row once).
  Json nulls = Json::object();
  for (std::size_t c = 0; c < inputs.first().columns.size(); ++c) {
    std::uint64_t count = 0;
    for (const Source& source : inputs.sources())
      if (c < source.columns.size()) count += source.columns[c].null_rows.size();
    if (count) nulls[inputs.first().columns[c].name] = count;
  }
  if (!nulls.empty()) manifest.sections["null_rows"] = nulls;
}

void write_rejects(const std::string& path, const ValidationOutcome& outcome,
                   const PackInputs& inputs, Durability durability) {
  std::string text;
  for (const auto& reject : outcome.result.rejects) {
    Json line;
    line["source"] = inputs.sources()[reject.source].path;
    line["row"] = inputs.sources()[reject.source].row_offset + reject.source_row;
    line["reason"] = drop_reason_name(reject.reason);
    if (reject.reason == DropReason::null) {
      // A null row names a packed column (NullRow::column), which need not be a checked one.
      line["column"] = inputs.first().columns.at(reject.column).name;
      text += line.dump() + "\n";
      continue;
    }
    if (reject.column < outcome.plan.columns.size())
      line["column"] = inputs.first().columns[outcome.plan.columns[reject.column]].name;
    line["norm"] = number_or_text(reject.norm);
    if (reject.reason == DropReason::pair_cos)
      line["pair_cosine"] = number_or_text(reject.pair_cosine);
    text += line.dump() + "\n";
  }
  write_file_atomic(path, text, durability);
}

}  // namespace gpucache::detail
