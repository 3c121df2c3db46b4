#include "pack_plan.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/common/hash.hpp"
#include "gpucache/error.hpp"
#include "gpucache/shard_io/shard_writer.hpp"

namespace gpucache::detail {

namespace {

// The stored dtype of a column. --dtype COLUMN=TYPE stores it as TYPE when the dtype table allows
// the conversion (gpucache/common/dtype_formats.hpp: u8 images as bf16, f64 as f32) and is an
// error naming the allowed targets otherwise, never ignored. --dtype TYPE converts every float
// column (integer and bool columns keep their type: labels stay integers). Without either, every
// column keeps its type: an f64 embedding is padded (and normalised) in f64 and checked on its
// f64 values, never rounded to f32 unless asked (issue #27).
DType output_dtype(const InputColumn& column, const std::string& input,
                   const PackOptions& options) {
  for (const auto& [name, dtype] : options.column_dtypes)
    if (name == column.name) {
      const std::string option = "--dtype " + column.name + "=" + std::string(dtype_name(dtype));
      // An i64 of dates or times means nothing in another dtype (its unit is in the manifest).
      if (column.time)
        throw Error(input, "column '" + column.name + "'",
                    "holds " + describe_time(*column.time) + " values, stored as i64, which " +
                        option + " cannot convert; leave the option out to store them as they are");
      if (column.kind != ColumnKind::tensor)
        throw Error(input, "column '" + column.name + "'",
                    "holds " + std::string(column.kind == ColumnKind::text ? "text" : "sequences") +
                        ", which " + option +
                        " cannot convert (only tensor columns are converted); leave the option "
                        "out to store it as it is");
      if (!dtype_conversion(column.dtype, dtype))
        throw Error(input, "column '" + column.name + "'",
                    "holds " + std::string(dtype_name(column.dtype)) + " values, which " + option +
                        " cannot store: " + std::string(dtype_name(column.dtype)) +
                        " may be stored as " + dtype_conversion_targets(column.dtype) +
                        ", or kept as it is without the option");
      return dtype;
    }
  if (column.kind == ColumnKind::text) return DType::u8;
  if (!dtype_is_float(column.dtype)) return column.dtype;
  if (options.dtype) {
    if (!dtype_conversion(column.dtype, *options.dtype))
      throw Error(input, "column '" + column.name + "'",
                  "holds " + std::string(dtype_name(column.dtype)) + " values, which --dtype " +
                      std::string(dtype_name(*options.dtype)) + " cannot store (they may be " +
                      "stored as " + dtype_conversion_targets(column.dtype) +
                      "); name the other float columns' type one by one with --dtype COLUMN=TYPE");
    return *options.dtype;
  }
  return column.dtype;
}

}  // namespace

std::vector<Column> output_columns(const Source& source, const PackOptions& options) {
  // The lambda reads named_dtype.first: clang before 16 cannot capture a structured binding.
  for (const auto& named_dtype : options.column_dtypes) {
    const auto& [name, dtype] = named_dtype;
    if (std::none_of(source.columns.begin(), source.columns.end(),
                     [&](const InputColumn& column) { return column.name == named_dtype.first; })) {
      std::string names;
      for (const auto& column : source.columns) names += (names.empty() ? "" : ", ") + column.name;
      throw UsageError("--dtype " + name + "=" + std::string(dtype_name(dtype)) +
                       " names no column of " + source.path + " (its columns: " + names + ")");
    }
  }
  std::vector<Column> specs;
  for (const auto& column : source.columns) {
    Column spec;
    spec.name = column.name;
    spec.kind = column.kind;
    spec.dtype = output_dtype(column, source.path, options);
    if (column.kind == ColumnKind::tensor) {
      // Padding is a property of the column: embedding rows are padded to the tensor-core pitch,
      // everything else is stored densely.
      spec.row_shape = column.row_shape;
      spec.padded_dim = is_embedding_column(column)
                            ? shard::padded_dim_for(column.dim(), spec.dtype, options.pad_to)
                            : column.dim();
    } else if (column.kind == ColumnKind::sequence) {
      spec.padded_dim = 0;
    }
    specs.push_back(spec);
  }
  // Provenance of every row: which input, and which row of it, under names no user column can
  // take (shard::is_provenance_column).
  specs.push_back(
      {std::string(shard::kSourceColumn), ColumnKind::tensor, shard::kSourceColumnDType, {}, 1});
  specs.push_back({std::string(shard::kSourceRowColumn),
                   ColumnKind::tensor,
                   shard::kSourceRowColumnDType,
                   {},
                   1});
  return specs;
}

std::uint64_t aligned_rows_quantum(const std::vector<Column>& specs) {
  std::uint64_t quantum = 1;
  for (const auto& spec : specs) {
    if (spec.variable_length()) continue;  // its offsets are per shard and never joined
    const std::uint64_t pitch = spec.row_pitch_bytes();
    quantum = std::lcm(quantum, shard::kAlignment / std::gcd(pitch, shard::kAlignment));
  }
  return quantum;
}

std::vector<ShardPlan> plan_shards(
    const std::vector<Column>& specs, const PackInputs& inputs, std::span<const std::uint64_t> rows,
    const PackOptions& options,
    const std::function<void(std::uint64_t first, std::uint64_t count)>& done_with) {
  std::vector<std::size_t> variable_columns;  // text and sequences: offsets, then values
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (specs[i].variable_length()) variable_columns.push_back(i);
  // A shard holds as many rows as fit in --shard-size by the shard writer's own size model (the
  // bytes write() gives the file: tables, aligned column regions, chunk table, footer).
  shard::ShardSizeModel size_of(specs);
  const std::uint64_t max_rows = options.shard_rows.value_or(UINT64_MAX);
  // Unless --shard-rows fixes the count, shards are cut at multiples of the aligned-rows quantum
  // when the size budget allows one, so that every tensor column's region in a full shard is a
  // whole number of pages and a reader can map shard after shard into one contiguous view.
  const std::uint64_t quantum = options.shard_rows ? 1 : aligned_rows_quantum(specs);
  auto round_to_quantum = [quantum](std::uint64_t rows) {
    return rows >= quantum ? rows / quantum * quantum : rows;
  };
  const std::vector<std::uint64_t> none(specs.size(), 0);
  std::vector<ShardPlan> plans;
  if (variable_columns.empty()) {
    // Fixed-size rows: every shard but the last holds the same number of rows, the most that fit
    // (the size grows with the rows, so a binary search finds it), at least one.
    // A shard of more than shard_size / row bytes rows is larger than shard_size.
    std::uint64_t row_bytes = 0;
    for (const auto& spec : specs) row_bytes += spec.row_pitch_bytes();
    std::uint64_t fits = 1, beyond = std::min(max_rows, options.shard_size /
                                                            std::max<std::uint64_t>(row_bytes, 1)) +
                                     1;
    while (beyond - fits > 1) {
      const std::uint64_t middle = fits + (beyond - fits) / 2;
      (size_of.bytes(middle, none) <= options.shard_size ? fits : beyond) = middle;
    }
    const std::uint64_t per_shard = round_to_quantum(fits);
    for (std::uint64_t first = 0; first < rows.size(); first += per_shard)
      plans.push_back({first, std::min<std::uint64_t>(per_shard, rows.size() - first), none});
    return plans;
  }
  // One row's value bytes per column, looked up once, then added to (or taken from) a plan.
  std::vector<std::uint64_t> row_values(specs.size(), 0);
  auto read_row = [&](std::uint64_t row) {
    for (std::size_t i : variable_columns) row_values[i] = inputs.value_bytes(i, rows[row]);
  };
  auto add_row = [&](ShardPlan& plan) {
    for (std::size_t i : variable_columns) plan.value_bytes[i] += row_values[i];
  };
  std::vector<std::uint64_t> trial = none;  // the current shard's values with the next row's
  ShardPlan current{0, 0, none};
  for (std::uint64_t row = 0; row < rows.size(); ++row) {
    read_row(row);
    bool full = current.rows == max_rows;
    if (current.rows > 0 && !full) {
      for (std::size_t i : variable_columns) trial[i] = current.value_bytes[i] + row_values[i];
      full = size_of.bytes(current.rows + 1, trial) > options.shard_size;
    }
    if (current.rows > 0 && full) {
      // Cut at the last multiple of the quantum; the rows after it open the next shard.
      const std::uint64_t kept = round_to_quantum(current.rows);
      ShardPlan next{current.first + kept, 0, none};
      for (std::uint64_t carried = next.first; carried < row; ++carried) {
        ++next.rows;
        read_row(carried);
        add_row(next);
        for (std::size_t i : variable_columns) current.value_bytes[i] -= row_values[i];
      }
      current.rows = kept;
      if (done_with) done_with(current.first, kept);
      plans.push_back(std::move(current));
      current = std::move(next);
      read_row(row);
    }
    ++current.rows;
    add_row(current);
  }
  if (current.rows > 0) plans.push_back(std::move(current));
  return plans;
}

std::string plan_text(const shard::Manifest& manifest, const std::vector<ShardPlan>& plans) {
  nlohmann::ordered_json json;
  json["tool_version"] = manifest.tool_version;
  json["inputs"] = nlohmann::ordered_json::array();
  for (const auto& input : manifest.inputs)
    json["inputs"].push_back(
        {{"path", input.path}, {"bytes", input.bytes}, {"xxh3", detail::hex64(input.xxh3)}});
  json["options"] = manifest.options;
  json["shards"] = nlohmann::ordered_json::array();
  for (const auto& plan : plans) json["shards"].push_back({plan.first, plan.rows});
  return json.dump(2) + "\n";
}

}  // namespace gpucache::detail
