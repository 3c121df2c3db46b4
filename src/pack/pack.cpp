#include "gpucache/pack.hpp"

#include <algorithm>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <tuple>

#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/common/hash.hpp"
#include "gpucache/error.hpp"
#include "gpucache/progress.hpp"
#include "gpucache/shard/dataset_check.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard_io/shard_reader.hpp"
#include "gpucache/shard_io/shard_writer.hpp"
#include "gpucache/validation_json.hpp"
#include "input_hashes.hpp"
#include "output_budget.hpp"
#include "output_dir.hpp"
#include "pack_append.hpp"
#include "pack_fill.hpp"
#include "pack_part.hpp"
#include "pack_plan.hpp"
#include "pack_split.hpp"
#include "pack_split_by.hpp"
#include "pack_validate.hpp"

namespace gpucache {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using detail::PackInputs;
using detail::ShardPlan;

void check_options(const PackOptions& options) {
  const bool file_columns = std::any_of(options.fields.begin(), options.fields.end(),
                                        [](const FieldSpec& field) { return !field.file.empty(); });
  const bool memory = !options.memory_columns.empty() || options.memory_tree;
  if (memory && (!options.inputs.empty() || file_columns))
    throw UsageError("columns in memory are packed on their own: pack input files separately");
  if (!options.memory_columns.empty() && options.memory_tree)
    throw UsageError("pack takes a dict of columns or an object tree in memory, not both");
  if (!options.input_mappings.empty()) {
    if (options.input_mappings.size() != options.inputs.size())
      throw UsageError(
          "--input-map lists the inputs with their mappings: give every input there, not "
          "also on the command line");
    if (options.kind || !options.fields.empty() || !options.roles.empty())
      throw UsageError(
          "--kind, --field and --role (kind=, fields=, roles=) apply to every input alike; "
          "in a mixed project give each input its own: \"kind\", \"fields\" and \"roles\" "
          "in its --input-map entry, or gpucache.Input(PATH, kind=..., fields=..., roles=...)");
    if (options.part)
      throw UsageError(
          "--part cannot be combined with --input-map: pack the mixed project in one run, or "
          "pack each input's share as parts with its own --field flags and merge them");
  }
  if (options.inputs.empty() && !file_columns && !memory)
    throw UsageError(
        "pack needs at least one input file (or columns named with --field "
        "COLUMN=FILE)");
  if (options.output_dir.empty())
    throw UsageError("pack needs an output directory (-o DIR, or --append DATASET)");
  // f64 is stored as an input holds it, never converted to (float_conversion_dtype).
  if (options.dtype && !float_conversion_dtype(*options.dtype))
    throw UsageError("--dtype must be " + std::string(kFloatConversionDTypes) +
                     " (f64 columns are stored as f64 without it)");
  // --dtype COLUMN=TYPE is checked against the column's dtype (the dtype table's conversions)
  // where the columns are known: output_columns.
  if (options.pad_to == 0 || options.pad_to > 4096)
    throw UsageError("--pad-to must be between 1 and 4096");
  if (options.shard_rows && *options.shard_rows == 0)
    throw UsageError("--shard-rows must be at least 1");
  if (options.shard_size == 0) throw UsageError("--shard-size must be positive");
  if (options.zstd_level < 0 || options.zstd_level > 22)
    throw UsageError("zstd level must be between 1 and 22");
  if (options.inputs.size() > 65535)
    throw UsageError("at most 65535 inputs can be packed into one dataset");
  if (options.resume && options.force) throw UsageError("--resume and --force cannot be combined");
  if (!options.split_by.empty() && !options.splits.empty())
    throw UsageError(
        "--split and --split-by cannot be combined: --split draws the splits by fractions, "
        "--split-by takes them from a column; pass one of them");
  if (options.part) {
    if (file_columns)
      throw UsageError(
          "--part splits input files; it cannot be combined with --field "
          "COLUMN=FILE");
    if (!options.splits.empty() || !options.split_by.empty())
      throw UsageError(std::string("--part and ") +
                       (options.splits.empty() ? "--split-by" : "--split") +
                       " cannot be combined: split the merged dataset's "
                       "parts instead, or pack each split's inputs as parts");
    if (options.part->count == 0 || options.part->index >= options.part->count)
      throw UsageError("--part K/N needs 0 <= K < N");
  }
}

std::uint64_t source_file_size(const std::string& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  return error ? 0 : static_cast<std::uint64_t>(size);
}

// What the progress total counts: the bytes of every input file, or of every column in memory.
std::uint64_t input_size(const PackOptions& options) {
  std::uint64_t bytes = 0;
  for (const auto& file : detail::input_files(options)) bytes += source_file_size(file);
  for (const auto& column : options.memory_columns)
    bytes += column.values.size() + column.offsets.size_bytes();
  if (options.memory_tree) bytes += memory_tree_provenance(*options.memory_tree).bytes;
  return bytes;
}

// The validation backend for the result: its name and why it was chosen. The validator describes
// itself as "device: NAME (DETAILS)".
std::pair<std::string, std::string> device_and_reason(const std::string& description,
                                                      Device requested) {
  if (description.empty()) return {"", "no embedding column to validate"};
  std::string name = description, details;
  if (name.starts_with("device: ")) name.erase(0, 8);
  if (const auto open = name.find(" ("); open != std::string::npos && name.ends_with(")")) {
    details = name.substr(open + 2, name.size() - open - 3);
    name.erase(open);
  }
  switch (requested) {
    case Device::cpu:
      return {name, "--device cpu"};
    case Device::cuda:
      return {name, "--device cuda: " + details};
    case Device::automatic:
      break;
  }
  return {name, "--device auto: " + details};
}

// Everything that shapes the bytes. The device is deliberately absent: CPU and CUDA write
// identical datasets. `rules`: the validation rules with each checked column's checks.
Json options_json(const PackOptions& options, const ValidationOptions& rules) {
  Json json;
  json["dtype"] = options.dtype ? std::string(dtype_name(*options.dtype)) : "keep";
  json["pad_to"] = options.pad_to;
  json["shard_size"] = options.shard_size;
  json["shard_rows"] = options.shard_rows ? Json(*options.shard_rows) : Json(nullptr);
  json["compress"] =
      options.zstd_level == 0 ? "none" : "zstd:" + std::to_string(options.zstd_level);
  json["chunk_size"] = shard::kDefaultChunkSize;
  json["validation"] = validation_options_to_json(rules);
  if (options.part) json["part"] = {{"index", options.part->index}, {"count", options.part->count}};
  // Keys of newer options are written only when used, so a dataset that uses none of them gets
  // the same manifest as before they existed.
  if (!options.column_dtypes.empty()) {
    Json dtypes = Json::object();
    for (const auto& [column, dtype] : options.column_dtypes) dtypes[column] = dtype_name(dtype);
    json["column_dtypes"] = dtypes;
  }
  if (!options.roles.empty()) {
    Json roles = Json::object();
    for (const auto& role : options.roles) roles[role.column] = column_role_name(role.role);
    json["roles"] = roles;
  }
  // --input-map (gpucache.Input): each input's own kind, fields, roles and fill texts, in input
  // order (the inputs' paths are the manifest's "inputs"). --resume refuses another map; --append
  // compares the stored columns, roles and checks instead (merge_parts.hpp).
  if (!options.input_mappings.empty()) {
    Json map = Json::array();
    for (const auto& mapping : options.input_mappings) {
      Json entry = Json::object();
      if (mapping.kind) entry["kind"] = source_kind_name(*mapping.kind);
      if (!mapping.fields.empty()) {
        Json fields = Json::object();
        for (const auto& field : mapping.fields)
          fields[field.column] = field.file.empty() ? field.path : field.file + ":" + field.path;
        entry["fields"] = fields;
      }
      if (!mapping.roles.empty()) {
        Json roles = Json::object();
        for (const auto& role : mapping.roles) roles[role.column] = column_role_name(role.role);
        entry["roles"] = roles;
      }
      if (!mapping.fill_texts.empty()) {
        Json fill = Json::object();
        for (const auto& [column, text] : mapping.fill_texts) fill[column] = text;
        entry["fill"] = fill;
      }
      map.push_back(entry);
    }
    json["input_map"] = map;
  }
  return json;
}

// The error of a pack whose checks keep no row: one line with the drop counts by reason.
Error no_rows_kept(const std::string& where, const ValidationResult& result) {
  std::string reasons;
  for (const auto& reason : drop_reasons()) {
    const std::uint64_t count = result.reasons[static_cast<std::size_t>(reason.reason)];
    if (count)
      reasons +=
          (reasons.empty() ? "" : ", ") + std::to_string(count) + " " + std::string(reason.name);
  }
  if (result.sampled_out)
    reasons += (reasons.empty() ? "" : ", ") + std::to_string(result.sampled_out) + " sampled out";
  return Error(where, "",
               "no row is kept: all " + std::to_string(result.rows_checked) + " rows were dropped" +
                   (reasons.empty() ? "" : " (" + reasons + ")") +
                   "; nothing was written (see --checks and --no-checks, docs/validation.md)");
}

// One dataset a pack writes: the whole output, or one split of it.
struct OutputDataset {
  std::string name;   // the split's name (its directory); empty without splits
  std::string value;  // --split-by: the column's value
  std::unique_ptr<detail::OutputDir> output;
  RowList rows;  // kept global rows in output order (in a file when large)
  double fraction = 0;
  std::vector<ShardPlan> plans;
};

struct DatasetIdentity {
  std::uint32_t shard_count = 0;
  std::uint64_t rows = 0;
  std::uint64_t id = 0;
};

// A shard left by an interrupted run is kept only if it is complete, intact and exactly the
// planned one (the shard module's place rule); anything else is rewritten.
std::optional<shard::WrittenShard> reuse_shard(const std::string& path, const ShardPlan& plan,
                                               std::size_t index, const DatasetIdentity& identity,
                                               unsigned threads) {
  std::error_code error;
  if (!fs::exists(path, error)) return std::nullopt;
  try {
    shard::ShardReader reader(path, true, threads);
    const auto& header = reader.layout().header;
    shard::ShardPlace planned;
    planned.index = static_cast<std::uint32_t>(index);
    planned.first_row = plan.first;
    planned.rows = plan.rows;
    planned.shard_count = identity.shard_count;
    planned.dataset_rows = identity.rows;
    planned.dataset_id = identity.id;
    if (shard::place_mismatch(header, planned)) return std::nullopt;
    return shard::WrittenShard{path, plan.rows, header.file_size, header.header_hash};
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Every (column, input dtype) stored as another dtype, once.
std::vector<StoredConversion> stored_conversions(const std::vector<Column>& specs,
                                                 const PackInputs& inputs,
                                                 const PackOptions& options) {
  std::vector<StoredConversion> conversions;
  for (std::size_t c = 0; c < inputs.first().columns.size(); ++c) {
    if (specs[c].kind != ColumnKind::tensor) continue;
    const bool asked = options.dtype.has_value() ||
                       std::any_of(options.column_dtypes.begin(), options.column_dtypes.end(),
                                   [&](const auto& entry) { return entry.first == specs[c].name; });
    for (const auto& source : inputs.sources()) {
      const DType from = source.columns[c].dtype;
      if (from == specs[c].dtype) continue;
      const bool known = std::any_of(conversions.begin(), conversions.end(), [&](const auto& seen) {
        return seen.column == specs[c].name && seen.from == from;
      });
      if (!known) {
        const auto conversion = dtype_conversion(from, specs[c].dtype);
        conversions.push_back(
            {specs[c].name, from, specs[c].dtype, asked, conversion && conversion->exact});
      }
    }
  }
  return conversions;
}

// One converter per column whose rows change on the way: embeddings (storage type, padding,
// normalisation) and float tensor columns stored in another float type than an input holds.
std::vector<std::unique_ptr<RowConverter>> make_converters(
    const std::vector<Column>& specs, const PackInputs& inputs,
    const std::vector<std::size_t>& embedding, const ValidationOptions& rules, unsigned threads) {
  std::vector<std::unique_ptr<RowConverter>> converters(specs.size());
  // An f64 embedding is stored as f64 only when every input holds f64 (pack() refuses others
  // first): its kept rows are copied as they are (fill_raw pads them) unless normalised.
  for (std::size_t c : embedding) {
    if (specs[c].dtype == DType::f64 && !rules.normalize) continue;
    ConversionOptions conversion = conversion_options(rules, specs[c].padded_dim);
    conversion.output_dtype = specs[c].dtype;
    conversion.threads = threads;
    converters[c] = std::make_unique<RowConverter>(conversion);
  }
  for (std::size_t c = 0; c < inputs.first().columns.size(); ++c) {
    if (converters[c] || specs[c].kind != ColumnKind::tensor || !dtype_is_float(specs[c].dtype))
      continue;
    const bool converted = std::any_of(
        inputs.sources().begin(), inputs.sources().end(),
        [&](const detail::Source& source) { return source.columns[c].dtype != specs[c].dtype; });
    if (!converted) continue;
    if (!float_conversion_dtype(specs[c].dtype))
      throw UsageError("column '" + specs[c].name + "' is " +
                       std::string(dtype_name(specs[c].dtype)) +
                       " in one input and another float type in another; pass --dtype " +
                       specs[c].name + "=f32 (or f16, bf16)");
    for (const auto& source : inputs.sources()) {
      const DType from = source.columns[c].dtype;
      if (!dtype_conversion(from, specs[c].dtype))
        throw Error(source.path, "column '" + specs[c].name + "'",
                    "holds " + std::string(dtype_name(from)) + " values, which cannot be stored " +
                        "as " + std::string(dtype_name(specs[c].dtype)) + " (they may be stored " +
                        "as " + dtype_conversion_targets(from) + "); pack this input apart or " +
                        "pass --dtype " + specs[c].name + "=TYPE with a type both allow");
    }
    ConversionOptions conversion;
    conversion.output_dtype = specs[c].dtype;
    conversion.padded_dim = specs[c].row_elements();
    conversion.on_overflow = rules.on_overflow;
    conversion.device = rules.device;
    conversion.threads = threads;
    converters[c] = std::make_unique<RowConverter>(conversion);
  }
  return converters;
}

// pack()'s steps, in the order it runs them.

// Opens the inputs (a --part run: its share, numbered as in the whole input list) and checks
// that they map to the same columns. `part_section` gets the manifest's "part" section.
PackInputs open_inputs(const PackOptions& requested, const PackOptions& options,
                       std::optional<nlohmann::ordered_json>& part_section) {
  std::vector<detail::Source> sources = detail::open_sources(options);
  if (options.part) {
    if (detail::part_uses_row_ranges(requested.inputs.size(), *options.part)) {
      sources = detail::part_row_ranges(std::move(sources), *options.part);
    } else {
      std::vector<std::string> sorted = requested.inputs;
      std::sort(sorted.begin(), sorted.end());
      const auto first = static_cast<std::uint32_t>(
          std::find(sorted.begin(), sorted.end(), options.inputs.front()) - sorted.begin());
      for (auto& source : sources) source.input_index += first;
    }
    part_section = detail::part_section(sources, requested.inputs.size(), *options.part);
  }
  {
    std::vector<SourceMapping> mappings;  // copies: the sources keep what they point into
    for (const auto& source : sources) mappings.push_back(*source.mapping);
    check_compatible(mappings);
  }
  // Rows are read by column index: every source's columns in the first one's order (inputs of
  // different layouts, e.g. an LLM cache's text + embedding beside embedding + text, agree on
  // names, not on order).
  for (auto& source : sources) {
    std::vector<InputColumn> ordered;
    for (const auto& column : sources.front().columns)
      for (const auto& own : source.columns)
        if (own.name == column.name) ordered.push_back(own);
    source.columns = std::move(ordered);
  }
  // A JSON object of 200,000 keys mapped to as many columns, and the pack ran past a minute
  // (its per-column work grows faster than the columns): such an input is refused at once.
  if (!sources.empty() && sources.front().columns.size() > kMaxPackColumns)
    throw Error(sources.front().path, "",
                "maps to " + std::to_string(sources.front().columns.size()) +
                    " columns; pack takes at most " + std::to_string(kMaxPackColumns) +
                    " (choose the columns with --field COLUMN=PATH, or store the values as one "
                    "array per row)");
  return PackInputs(std::move(sources));
}

// The kept rows as the datasets to write: one, one per --split (each must get a row), or one per
// value of the --split-by column that some kept row holds.
std::vector<OutputDataset> split_kept_rows(RowList& kept,
                                           const std::optional<detail::SplitRule>& split_rule,
                                           const std::optional<detail::SplitByColumn>& split_by,
                                           const PackInputs& inputs, const PackOptions& options) {
  std::vector<OutputDataset> datasets;
  if (split_by) {
    auto parts = split_by->assign(kept, inputs);
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const detail::SplitValue& value = split_by->values()[i];
      if (!parts[i].empty())
        datasets.push_back({value.name, value.value, nullptr, std::move(parts[i]), 0, {}});
    }
    return datasets;
  }
  if (!split_rule) {
    datasets.push_back({"", "", nullptr, std::move(kept), 1.0, {}});
    return datasets;
  }
  auto parts = split_rule->assign(kept);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const SplitSpec& split = split_rule->split(i);
    if (parts[i].empty())
      throw Error(options.output_dir, "--split " + split.name,
                  "no row falls into this split (" + std::to_string(kept.size()) +
                      " rows kept); give it a larger fraction or pack more rows");
    datasets.push_back({split.name, "", nullptr, std::move(parts[i]), split.fraction, {}});
  }
  return datasets;
}

// Every dataset's shards are planned, and their bytes checked, before any directory is claimed;
// every output directory is claimed before any is written, so a run that fails leaves none.
void plan_and_claim(std::vector<OutputDataset>& datasets, const std::vector<Column>& specs,
                    const PackInputs& inputs, const PackOptions& options, detail::OutputMode mode,
                    detail::Durability durability) {
  std::vector<const std::vector<ShardPlan>*> planned;
  for (auto& dataset : datasets) {
    dataset.plans = detail::plan_shards(
        specs, inputs, dataset.rows, options,
        [&](std::uint64_t first, std::uint64_t count) { dataset.rows.release(first, count); });
    // (The last shard's rows are not reported by done_with.)
    dataset.rows.release_all();
    planned.push_back(&dataset.plans);
  }
  detail::check_planned_output(specs, planned, options);
  for (auto& dataset : datasets) {
    const std::string dir = dataset.name.empty()
                                ? options.output_dir
                                : (fs::path(options.output_dir) / dataset.name).string();
    dataset.output = std::make_unique<detail::OutputDir>(dir, mode, durability);
  }
}

// What every dataset's manifest shares: options, columns and roles, validation results, the
// part and split sections. Not yet the inputs' hashes, which the first shard's plan waits for.
shard::Manifest base_manifest(const PackOptions& options, const std::vector<Column>& specs,
                              const PackInputs& inputs, const detail::ValidationOutcome& outcome,
                              const std::optional<nlohmann::ordered_json>& part_section,
                              const std::vector<OutputDataset>& datasets, bool split,
                              const std::optional<detail::SplitByColumn>& split_by) {
  shard::Manifest base;
  base.tool_version = GPUCACHE_VERSION;
  base.options = options_json(options, detail::recorded_rules(outcome.plan));
  base.columns = specs;
  for (const auto& column : inputs.first().columns) base.roles.push_back(column.role);
  base.roles.resize(specs.size(), ColumnRole::tensor);  // the provenance columns
  for (std::size_t c = 0; c < inputs.first().columns.size(); ++c)
    if (const auto& time = inputs.first().columns[c].time) {
      base.times.resize(specs.size());
      base.times[c] = time;
    }
  detail::add_validation_sections(base, outcome, inputs);
  if (part_section) base.sections["part"] = *part_section;
  if (split_by) {
    // The values as the column holds them: integers as JSON numbers.
    auto value_json = [&](const std::string& value) {
      return split_by->integer() ? Json::parse(value) : Json(value);
    };
    Json values = Json::object(), counts = Json::object();
    for (const auto& dataset : datasets) {
      values[dataset.name] = value_json(dataset.value);
      counts[dataset.name] = dataset.rows.size();
    }
    base.sections["split"] = {{"name", nullptr},
                              {"by", split_by->column()},
                              {"value", nullptr},
                              {"values", values},
                              {"rows", counts}};
  } else if (split) {
    Json fractions = Json::object(), counts = Json::object();
    for (const auto& dataset : datasets) {
      fractions[dataset.name] = dataset.fraction;
      counts[dataset.name] = dataset.rows.size();
    }
    base.sections["split"] = {{"name", nullptr},
                              {"fractions", fractions},
                              {"rows", counts},
                              {"seed", options.validation.seed}};
  }
  return base;
}

// The result's account of what was packed and how, before any shard is written.
PackResult describe_result(const PackInputs& inputs, const std::vector<Column>& specs,
                           const PackOptions& options, const detail::ValidationOutcome& outcome,
                           const std::optional<detail::SplitByColumn>& split_by,
                           const detail::FieldsNotPacked& fields,
                           const std::vector<InputConversion>& input_conversions) {
  PackResult result;
  for (const auto& column : inputs.first().columns)
    if (column.time) result.times.emplace_back(column.name, *column.time);
  result.output_dir = options.output_dir;
  if (split_by) {
    result.split_by = split_by->column();
    result.split_by_integer = split_by->integer();
  }
  result.left_out = fields.left_out;
  result.conversions = stored_conversions(specs, inputs, options);
  result.input_conversions = input_conversions;
  result.not_selected = fields.not_selected;
  result.renamed = fields.renamed;
  result.input_rows = inputs.total_rows();
  std::tie(result.device, result.device_reason) =
      device_and_reason(outcome.device_description, options.validation.device);
  result.validation_uploaded_bytes = outcome.result.uploaded_bytes;
  return result;
}

// The drop counts, the rejects file, and each dataset's manifest last (what makes it a dataset).
void finish_pack(PackResult& result, std::vector<OutputDataset>& datasets,
                 const std::vector<shard::Manifest>& manifests,
                 const detail::ValidationOutcome& outcome, const PackInputs& inputs,
                 const PackOptions& options, detail::Durability durability) {
  for (std::size_t r = 1; r < kDropReasonCount; ++r) result.dropped[r] = outcome.result.reasons[r];
  result.sampled_out = outcome.result.sampled_out;
  if (!options.rejects_path.empty())
    detail::write_rejects(options.rejects_path, outcome, inputs, durability);
  for (std::size_t d = 0; d < datasets.size(); ++d)
    datasets[d].output->finish(shard::manifest_to_text(manifests[d]));
}

// What pack()'s writing steps share once the inputs are validated and the datasets planned.
struct PackRun {
  const PackOptions& options;
  const std::vector<Column>& specs;
  PackInputs& inputs;
  std::vector<std::unique_ptr<RowConverter>>& converters;
  detail::Durability durability;
  Progress& progress;
  detail::InputHashes& input_hashes;
  shard::Manifest& base;  // base.inputs is filled by the first dataset's plan
  bool splitting = false;
  bool split_by = false;
  std::uint64_t filled_columns = 0;
  bool inputs_hashed = false;
  std::future<void> freeing_inputs;  // the parsed inputs, freed beside the last shard's write
};

// Fills, converts and writes one dataset's shards (a --resume run keeps those already complete
// and as planned), recording its plan before the first shard is complete; returns its manifest,
// written by finish_pack once every dataset is done.
shard::Manifest write_dataset(OutputDataset& dataset, bool last_dataset, PackRun& run,
                              PackResult& result) {
  const PackOptions& options = run.options;
  const std::vector<Column>& specs = run.specs;
  PackInputs& inputs = run.inputs;
  detail::OutputDir& output = *dataset.output;
  shard::Manifest manifest = run.base;
  if (run.splitting) manifest.sections["split"]["name"] = dataset.name;
  if (run.split_by)
    manifest.sections["split"]["value"] = manifest.sections["split"]["values"][dataset.name];
  const std::span<const std::uint64_t> rows = dataset.rows;
  manifest.rows = rows.size();
  const auto& plans = dataset.plans;
  if (plans.size() > UINT32_MAX)
    throw UsageError("the options make " + std::to_string(plans.size()) +
                     " shards; a dataset holds at most 4294967295: raise --shard-size or " +
                     "--shard-rows");
  // The plan names the inputs by content hash. It is recorded before any shard is complete
  // (a shard's header carries the plan's hash, and a shard becomes a dataset file only by its
  // final rename), so a resumed run finds it; a fresh run fills its first shard meanwhile.
  DatasetIdentity identity;
  bool planned = false;
  auto record_plan = [&] {
    if (planned) return;
    planned = true;
    if (!run.inputs_hashed) run.base.inputs = run.input_hashes.get();
    run.inputs_hashed = true;
    manifest.inputs = run.base.inputs;
    const std::string plan_text = detail::plan_text(manifest, plans);
    output.record_plan(plan_text);
    // Every shard carries the plan's hash, so readers without the manifest can tell whether
    // shards belong together (SPEC.md, header dataset fields).
    identity.shard_count = static_cast<std::uint32_t>(plans.size());
    identity.rows = rows.size();
    identity.id = detail::xxh3_64(std::as_bytes(std::span(plan_text)));
  };
  if (options.resume) record_plan();
  PackedSplit packed{
      dataset.name, output.path(), dataset.fraction, dataset.value, rows.size(), 0, {}};
  for (std::size_t s = 0; s < plans.size(); ++s) {
    const ShardPlan& plan = plans[s];
    const std::string file = shard::shard_file_name(static_cast<std::uint32_t>(s));
    std::optional<shard::WrittenShard> written;
    if (options.resume) {
      written = reuse_shard(output.file(file), plan, s, identity, options.threads);
      if (written) {
        ++result.resumed_shards;
        run.progress.advance(plan.rows * run.filled_columns);
      }
    }
    if (!written) {
      const auto shard_rows = rows.subspan(plan.first, plan.rows);
      // Uncompressed shards are filled straight into their (temporary) file's page cache.
      shard::ShardBuilder builder =
          options.zstd_level == 0
              ? shard::ShardBuilder(specs, plan.rows, plan.value_bytes, output.file(file),
                                    run.durability)
              : shard::ShardBuilder(specs, plan.rows, plan.value_bytes, run.durability);
      const auto counts = detail::fill_shard(builder, specs, inputs, shard_rows, run.converters,
                                             options.threads, run.progress);
      result.overflowed_values += counts.overflowed;
      result.flushed_to_zero_values += counts.flushed_to_zero;
      if (last_dataset && s + 1 == plans.size() && options.threads != 1)
        // No row is read after the last fill: the parsed inputs are freed while it is
        // written (the manifest and the rejects need only what release_rows keeps).
        run.freeing_inputs = std::async(
            std::launch::async, [released = inputs.release_rows()]() mutable { released.clear(); });
      record_plan();
      shard::WriteOptions write_options;
      write_options.first_row = plan.first;
      write_options.shard_index = static_cast<std::uint32_t>(s);
      write_options.shard_count = identity.shard_count;
      write_options.dataset_rows = identity.rows;
      write_options.dataset_id = identity.id;
      write_options.zstd_level = options.zstd_level;
      write_options.threads = options.threads;
      written = builder.write(output.file(file), write_options);
    }
    dataset.rows.release(plan.first, plan.rows);
    manifest.shards.push_back({file, plan.rows, plan.first, written->bytes, written->header_hash});
    packed.shards.push_back({file, plan.rows, written->bytes});
    packed.bytes += written->bytes;
  }
  result.rows += packed.rows;
  result.bytes += packed.bytes;
  if (run.splitting)
    result.splits.push_back(std::move(packed));
  else
    result.shards = std::move(packed.shards);
  return manifest;
}

}  // namespace

namespace detail {
Json pack_options_json(const PackOptions& options) {
  // Without the per-column checks, which follow from the inputs' columns (plan_validation).
  return options_json(options, options.validation);
}
}  // namespace detail

PackResult pack(const PackOptions& requested) {
  if (!requested.append_to.empty()) return detail::pack_append(requested);
  check_options(requested);
  // A --part run reads its share of the inputs (pack_part.hpp); every other run reads them all.
  PackOptions options = requested;
  if (options.part) options.inputs = detail::part_input_files(requested.inputs, *options.part);
  std::optional<detail::SplitRule> split_rule;
  if (!options.splits.empty()) split_rule.emplace(options.splits, options.validation.seed);
  const auto durability = detail::durability_for(options.fsync);
  detail::InputHashes input_hashes(detail::input_files(options), options.threads != 1,
                                   options.memory_columns, options.memory_tree);
  std::optional<nlohmann::ordered_json> part_section;
  PackInputs inputs = open_inputs(requested, options, part_section);
  const auto fields = detail::fields_not_packed(inputs.sources(), options.strict);
  const auto& [left_out, not_selected, renamed] = fields;
  const auto specs = detail::output_columns(inputs.first(), options);
  // f64 stays f64 unless asked (issue #27): an input whose f64 column would be rounded to the
  // first input's type (f64 beside f32) is refused without --dtype, and so is one whose values
  // would have to be widened to f64 (f32 beside f64: nothing is stored as f64 but f64 values).
  // (Narrower mixes, f32 beside a bf16 first input, are stored in the first input's type and
  // reported; make_converters refuses the conversions the table lacks.)
  for (const auto& conversion : stored_conversions(specs, inputs, options)) {
    if (conversion.asked || conversion.exact) continue;
    const bool rounds = dtype_conversion(conversion.from, conversion.to).has_value();
    if (rounds ? conversion.from != DType::f64 : conversion.to != DType::f64) continue;
    for (const auto& source : inputs.sources()) {
      const auto& column =
          *std::find_if(source.columns.begin(), source.columns.end(),
                        [&](const InputColumn& own) { return own.name == conversion.column; });
      if (column.dtype != conversion.from) continue;
      const std::string from(dtype_name(conversion.from)), to(dtype_name(conversion.to));
      throw Error(source.path, "column '" + conversion.column + "'",
                  "holds " + from + " values, " +
                      (rounds ? "which storing as the first input's " + to + " would round"
                              : "while an input before it holds " + to + ", stored as " + to) +
                      "; pass --dtype " + conversion.column + "=" +
                      (rounds ? to : std::string("f32 (or f16, bf16)")) +
                      " to store them all in one type, or pack the inputs apart");
    }
  }
  // An output that cannot fit even before validation drops a row is refused before it runs.
  detail::check_output_bound(specs, inputs, options);
  // The --split-by column's values are read (and their errors raised) before validation.
  std::optional<detail::SplitByColumn> split_by;
  if (!options.split_by.empty()) split_by.emplace(inputs, options.split_by);
  const bool splitting = split_rule || split_by;
  const auto mode = options.resume  ? detail::OutputMode::resume
                    : options.force ? detail::OutputMode::replace
                                    : detail::OutputMode::fresh;
  // Progress counts input bytes: validation (when there is an embedding column to check) takes
  // the first half of them, filling the shards the rest.
  const std::uint64_t input_bytes = input_size(options);
  Progress progress(options.show_progress, "pack", input_bytes, options.progress_callback);
  std::uint64_t checked_values = 0;
  for (const auto& column : inputs.first().columns)
    if (detail::is_embedding_column(column)) checked_values += column.dim();
  const std::uint64_t validation_share = checked_values ? input_bytes / 2 : 0;
  progress.begin_stage(checked_values * 4 * inputs.total_rows(), validation_share);

  // Pass 1: validation decides which rows are kept and in what order.
  auto outcome = detail::validate_inputs(inputs, specs, options, progress);
  if (outcome.result.rows.empty()) throw no_rows_kept(options.output_dir, outcome.result);
  std::vector<OutputDataset> datasets =
      split_kept_rows(outcome.result.rows, split_rule, split_by, inputs, options);
  plan_and_claim(datasets, specs, inputs, options, mode, durability);

  shard::Manifest base = base_manifest(options, specs, inputs, outcome, part_section, datasets,
                                       split_rule.has_value(), split_by);
  if (!left_out.empty()) base.sections["left_out"] = detail::left_out_json(left_out);
  if (!renamed.empty()) base.sections["renamed"] = detail::renamed_json(renamed);
  const auto input_conversions = detail::input_conversions(inputs.sources());
  if (!input_conversions.empty())
    base.sections["input_conversions"] = detail::input_conversions_json(input_conversions);
  // base.inputs (the inputs' content hashes) is filled by the first dataset's plan below: hashing
  // the inputs runs on its own thread beside the first shard's fill.

  // Pass 2: per dataset, fill, convert and write each planned shard.
  // Each converter takes its column's storage type: embedding columns may differ (--dtype A=f16).
  auto converters =
      make_converters(specs, inputs, outcome.columns, outcome.plan.rules, options.threads);
  PackResult result =
      describe_result(inputs, specs, options, outcome, split_by, fields, input_conversions);
  PackRun run{options,
              specs,
              inputs,
              converters,
              durability,
              progress,
              input_hashes,
              base,
              splitting,
              split_by.has_value(),
              inputs.first().columns.size(),
              false,
              {}};
  std::uint64_t filled_rows = 0;
  for (const auto& dataset : datasets) filled_rows += dataset.rows.size();
  progress.begin_stage(filled_rows * run.filled_columns, input_bytes - validation_share);
  std::vector<shard::Manifest> manifests;
  for (std::size_t d = 0; d < datasets.size(); ++d)
    manifests.push_back(write_dataset(datasets[d], d + 1 == datasets.size(), run, result));
  progress.finish();
  finish_pack(result, datasets, manifests, outcome, inputs, options, durability);
  if (run.freeing_inputs.valid()) run.freeing_inputs.get();
  return result;
}

}  // namespace gpucache
