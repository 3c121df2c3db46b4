#include "gpucache/pack.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "formats/shard/manifest.hpp"
#include "formats/shard/shard_reader.hpp"
#include "formats/shard/shard_writer.hpp"
#include "gpucache/detail/float_convert.hpp"
#include "gpucache/detail/mapped_file.hpp"
#include "gpucache/detail/parallel.hpp"
#include "gpucache/error.hpp"
#include "gpucache/progress.hpp"
#include "src/core/output_dir.hpp"
#include "src/core/source.hpp"

namespace gpucache {
namespace {

namespace fs = std::filesystem;
using detail::Source;
using shard::ColumnKind;
using shard::ColumnSpec;

constexpr std::uint64_t kRowsPerBlock = 2048;

// Where row r of the concatenated inputs comes from.
struct InputRow {
  std::uint32_t source;
  std::uint64_t row;
};

class RowIndex {
 public:
  explicit RowIndex(const std::vector<Source>& sources) {
    std::uint64_t total = 0;
    for (const auto& source : sources) {
      starts_.push_back(total);
      total += source.rows;
    }
    total_ = total;
  }
  std::uint64_t total() const noexcept { return total_; }
  InputRow locate(std::uint64_t global_row) const noexcept {
    const auto it = std::upper_bound(starts_.begin(), starts_.end(), global_row);
    const auto source = static_cast<std::uint32_t>(it - starts_.begin() - 1);
    return {source, global_row - starts_[source]};
  }
  std::uint64_t rows_left_in_source(std::uint64_t global_row) const noexcept {
    const auto it = std::upper_bound(starts_.begin(), starts_.end(), global_row);
    return (it == starts_.end() ? total_ : *it) - global_row;
  }

 private:
  std::vector<std::uint64_t> starts_;
  std::uint64_t total_ = 0;
};

DType output_dtype(const detail::SourceColumn& column, const PackOptions& options) {
  if (!dtype_is_float(column.dtype)) return column.dtype;
  if (options.dtype) return *options.dtype;
  return column.dtype == DType::f64 ? DType::f32 : column.dtype;
}

// Every input must offer the same columns with the same shapes, or nothing can be concatenated.
void check_compatible(const std::vector<Source>& sources) {
  const Source& first = sources.front();
  for (const Source& other : sources) {
    bool same = other.columns.size() == first.columns.size();
    for (std::size_t i = 0; same && i < first.columns.size(); ++i)
      same = other.columns[i].name == first.columns[i].name &&
             other.columns[i].kind == first.columns[i].kind &&
             other.columns[i].dim == first.columns[i].dim &&
             other.columns[i].rank == first.columns[i].rank;
    if (same) continue;
    std::string listing;
    for (const Source& source : sources) {
      listing += "\n  " + source.path + ":";
      for (const auto& column : source.columns)
        listing +=
            " " + column.name +
            (column.kind == ColumnKind::text ? "(text)" : "[" + std::to_string(column.dim) + "]");
    }
    throw Error(other.path, "",
                "inputs have different columns or dims and cannot be concatenated:" + listing);
  }
}

std::vector<ColumnSpec> output_columns(const Source& source, const PackOptions& options) {
  std::vector<ColumnSpec> specs;
  for (const auto& column : source.columns) {
    ColumnSpec spec;
    spec.name = column.name;
    spec.kind = column.kind;
    if (column.kind == ColumnKind::tensor) {
      spec.dtype = output_dtype(column, options);
      spec.rank = column.rank;
      spec.dim = column.dim;
      spec.padded_dim =
          column.rank == 2 ? shard::padded_dim_for(column.dim, spec.dtype, options.pad_to) : 1;
    }
    specs.push_back(spec);
  }
  // Provenance of every row: which input, and which row of it.
  specs.push_back({"source", ColumnKind::tensor, DType::u16, 1, 1, 1});
  specs.push_back({"source_row", ColumnKind::tensor, DType::u64, 1, 1, 1});
  return specs;
}

// Fills rows [first, first + count) of the output, which are rows [global_first, ...) of the
// concatenated inputs, into shard rows starting at shard_row.
void fill_tensor_rows(shard::ShardBuilder& builder, std::size_t column_index,
                      const ColumnSpec& spec, const detail::SourceColumn& source_column,
                      std::uint64_t source_first, std::uint64_t count, std::uint64_t shard_row) {
  const std::uint64_t pitch = builder.columns()[column_index].row_pitch_bytes;
  const std::uint64_t dim = spec.dim;
  std::byte* out = builder.tensor_data(column_index).data() + shard_row * pitch;
  const std::size_t in_size = dtype_size(source_column.dtype);
  const std::size_t out_size = dtype_size(spec.dtype);
  thread_local std::vector<std::byte> raw;
  thread_local std::vector<float> widened;
  raw.resize(count * dim * in_size);
  source_column.read_rows(source_first, count, raw);
  const bool same_type = source_column.dtype == spec.dtype;
  if (!same_type) widened.resize(dim);
  for (std::uint64_t r = 0; r < count; ++r) {
    const std::byte* in_row = raw.data() + r * dim * in_size;
    std::byte* out_row = out + r * pitch;
    if (same_type) {
      std::memcpy(out_row, in_row, dim * out_size);
    } else {
      detail::widen_to_f32(source_column.dtype, in_row, widened.data(), dim);
      detail::narrow_from_f32(spec.dtype, widened.data(), out_row, dim);
    }
  }
}

struct ShardPlan {
  std::uint64_t first = 0;  // first output row
  std::uint64_t rows = 0;
};

// Splits rows into shards no larger than shard_size bytes (and shard_rows rows); a shard always
// takes at least one row.
std::vector<ShardPlan> plan_shards(const std::vector<ColumnSpec>& specs,
                                   const std::vector<Source>& sources, const RowIndex& index,
                                   const PackOptions& options) {
  std::uint64_t fixed_row_bytes = 0;
  std::vector<std::size_t> text_columns;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].kind == ColumnKind::text) {
      fixed_row_bytes += 8;
      text_columns.push_back(i);
    } else {
      fixed_row_bytes += specs[i].padded_dim * dtype_size(specs[i].dtype);
    }
  }
  // Alignment padding per column and the tables cost a few pages per shard.
  const std::uint64_t overhead = (specs.size() * 2 + 2) * shard::kAlignment;
  const std::uint64_t budget = options.shard_size > overhead ? options.shard_size - overhead : 0;
  const std::uint64_t max_rows = options.shard_rows.value_or(UINT64_MAX);
  std::vector<ShardPlan> plans;
  ShardPlan current;
  std::uint64_t current_bytes = 0;
  for (std::uint64_t row = 0; row < index.total(); ++row) {
    std::uint64_t row_bytes = fixed_row_bytes;
    if (!text_columns.empty()) {
      const InputRow at = index.locate(row);
      for (std::size_t i : text_columns)
        row_bytes += sources[at.source].columns[i].text_row(at.row).size();
    }
    if (current.rows > 0 && (current.rows == max_rows || current_bytes + row_bytes > budget)) {
      plans.push_back(current);
      current = {row, 0};
      current_bytes = 0;
    }
    ++current.rows;
    current_bytes += row_bytes;
    if (text_columns.empty() && current.rows == 1) {
      // Fixed-size rows: take the whole shard at once instead of row by row.
      std::uint64_t fit = budget / std::max<std::uint64_t>(fixed_row_bytes, 1);
      fit = std::clamp<std::uint64_t>(fit, 1, max_rows);
      const std::uint64_t take = std::min(fit, index.total() - row);
      current.rows = take;
      current_bytes = take * fixed_row_bytes;
      row += take - 1;
    }
  }
  if (current.rows > 0) plans.push_back(current);
  return plans;
}

std::uint64_t hash_file(const std::string& path, std::uint64_t& size) {
  auto file = detail::MappedFile::open(path);
  file->advise_sequential();
  size = file->size();
  return shard::xxh3_64(file->bytes());
}

nlohmann::ordered_json options_json(const PackOptions& options) {
  nlohmann::ordered_json json;
  json["dtype"] = options.dtype ? std::string(dtype_name(*options.dtype)) : "keep";
  json["pad_to"] = options.pad_to;
  json["shard_size"] = options.shard_size;
  json["shard_rows"] = options.shard_rows ? nlohmann::ordered_json(*options.shard_rows) : nullptr;
  json["compress"] =
      options.zstd_level == 0 ? "none" : "zstd:" + std::to_string(options.zstd_level);
  json["chunk_size"] = shard::kDefaultChunkSize;
  return json;
}

// What a resumed run must agree on with the interrupted one: inputs (by content hash), options
// and where every shard starts and ends.
std::string plan_text(const shard::Manifest& manifest, const std::vector<ShardPlan>& plans) {
  nlohmann::ordered_json json;
  json["tool_version"] = manifest.tool_version;
  json["inputs"] = nlohmann::ordered_json::array();
  for (const auto& input : manifest.inputs)
    json["inputs"].push_back(
        {{"path", input.path}, {"bytes", input.bytes}, {"xxh3", shard::hex64(input.xxh3)}});
  json["options"] = manifest.options;
  json["shards"] = nlohmann::ordered_json::array();
  for (const auto& plan : plans) json["shards"].push_back({plan.first, plan.rows});
  return json.dump(2) + "\n";
}

// A shard left by an interrupted run is kept only if it is complete, intact and exactly the
// planned one; anything else is rewritten.
std::optional<shard::WrittenShard> reuse_shard(const std::string& path, const ShardPlan& plan,
                                               std::size_t index, unsigned threads) {
  std::error_code error;
  if (!fs::exists(path, error)) return std::nullopt;
  try {
    shard::ShardReader reader(path, true, threads);
    const auto& header = reader.layout().header;
    if (header.row_count != plan.rows || header.first_row != plan.first ||
        header.shard_index != index)
      return std::nullopt;
    return shard::WrittenShard{path, plan.rows, header.file_size, header.header_hash};
  } catch (const Error&) {
    return std::nullopt;
  }
}

void check_options(const PackOptions& options) {
  if (options.inputs.empty()) throw UsageError("pack needs at least one input file");
  if (options.output_dir.empty()) throw UsageError("pack needs an output directory (-o DIR)");
  if (options.dtype && *options.dtype != DType::f32 && *options.dtype != DType::f16 &&
      *options.dtype != DType::bf16)
    throw UsageError("--dtype must be f32, f16 or bf16");
  if (options.pad_to == 0 || options.pad_to > 4096)
    throw UsageError("--pad-to must be between 1 and 4096");
  if (options.shard_rows && *options.shard_rows == 0)
    throw UsageError("--shard-rows must be at least 1");
  if (options.shard_size == 0) throw UsageError("--shard-size must be positive");
  if (options.zstd_level < 0 || options.zstd_level > 22)
    throw UsageError("zstd level must be between 1 and 22");
  if (options.inputs.size() > 65535)
    throw UsageError("at most 65535 inputs can be packed into one dataset");
}

}  // namespace

PackResult pack(const PackOptions& options) {
  check_options(options);
  std::vector<Source> sources;
  for (const auto& input : options.inputs) sources.push_back(detail::open_source(input));
  check_compatible(sources);
  const auto specs = output_columns(sources.front(), options);
  const RowIndex index(sources);
  const auto plans = plan_shards(specs, sources, index, options);

  detail::OutputDir output(options.output_dir, options.resume  ? detail::OutputMode::resume
                                               : options.force ? detail::OutputMode::replace
                                                               : detail::OutputMode::fresh);

  shard::Manifest manifest;
  manifest.tool_version = GPUCACHE_VERSION;
  manifest.rows = index.total();
  manifest.options = options_json(options);
  for (const auto& source : sources) {
    shard::ManifestInput input;
    input.path = source.path;
    input.xxh3 = hash_file(source.path, input.bytes);
    manifest.inputs.push_back(input);
  }
  output.record_plan(plan_text(manifest, plans));

  std::uint64_t total_bytes = 0;
  const std::vector<std::uint64_t> no_text(specs.size(), 0);
  for (const auto& plan : plans)
    total_bytes += shard::estimate_shard_bytes(specs, plan.rows, no_text);
  const std::uint64_t bytes_per_row = total_bytes / std::max<std::uint64_t>(index.total(), 1);
  Progress progress(options.show_progress, "pack", total_bytes);
  PackResult result;
  result.output_dir = options.output_dir;
  result.input_rows = index.total();
  result.rows = index.total();

  for (std::size_t s = 0; s < plans.size(); ++s) {
    const ShardPlan& plan = plans[s];
    const std::string file = shard::shard_file_name(static_cast<std::uint32_t>(s));
    if (options.resume) {
      if (auto kept = reuse_shard(output.file(file), plan, s, options.threads)) {
        manifest.shards.push_back({file, plan.rows, plan.first, kept->bytes, kept->header_hash});
        result.shards.push_back({file, plan.rows, kept->bytes});
        result.bytes += kept->bytes;
        ++result.resumed_shards;
        progress.advance(plan.rows * bytes_per_row);
        continue;
      }
    }
    std::vector<std::uint64_t> text_bytes(specs.size(), 0);
    for (std::size_t c = 0; c < specs.size(); ++c) {
      if (specs[c].kind != ColumnKind::text) continue;
      for (std::uint64_t r = 0; r < plan.rows; ++r) {
        const InputRow at = index.locate(plan.first + r);
        text_bytes[c] += sources[at.source].columns[c].text_row(at.row).size();
      }
    }
    shard::ShardBuilder builder(specs, plan.rows, text_bytes);
    const std::size_t source_column = specs.size() - 2;
    const std::size_t source_row_column = specs.size() - 1;

    // Rows are filled in blocks that never straddle two inputs, in parallel.
    const std::uint64_t blocks = (plan.rows + kRowsPerBlock - 1) / kRowsPerBlock;
    detail::parallel_for(blocks, options.threads, [&](std::uint64_t block) {
      std::uint64_t row = block * kRowsPerBlock;
      const std::uint64_t end = std::min(plan.rows, row + kRowsPerBlock);
      while (row < end) {
        const std::uint64_t global = plan.first + row;
        const InputRow at = index.locate(global);
        const std::uint64_t count = std::min(end - row, index.rows_left_in_source(global));
        const Source& source = sources[at.source];
        for (std::size_t c = 0; c < source.columns.size(); ++c)
          if (specs[c].kind == ColumnKind::tensor)
            fill_tensor_rows(builder, c, specs[c], source.columns[c], at.row, count, row);
        auto* source_ids =
            reinterpret_cast<std::uint16_t*>(builder.tensor_data(source_column).data());
        auto* source_rows =
            reinterpret_cast<std::uint64_t*>(builder.tensor_data(source_row_column).data());
        for (std::uint64_t r = 0; r < count; ++r) {
          source_ids[row + r] = static_cast<std::uint16_t>(at.source);
          source_rows[row + r] = at.row + r;
        }
        row += count;
      }
      progress.advance((end - block * kRowsPerBlock) * bytes_per_row);
    });
    for (std::size_t c = 0; c < specs.size(); ++c) {
      if (specs[c].kind != ColumnKind::text) continue;
      auto offsets = builder.text_offsets(c);
      auto bytes = builder.text_bytes(c);
      std::uint64_t cursor = 0;
      for (std::uint64_t r = 0; r < plan.rows; ++r) {
        offsets[r] = cursor;
        const InputRow at = index.locate(plan.first + r);
        const auto text = sources[at.source].columns[c].text_row(at.row);
        std::memcpy(bytes.data() + cursor, text.data(), text.size());
        cursor += text.size();
      }
      offsets[plan.rows] = cursor;
    }

    shard::WriteOptions write_options;
    write_options.first_row = plan.first;
    write_options.shard_index = static_cast<std::uint32_t>(s);
    write_options.zstd_level = options.zstd_level;
    write_options.threads = options.threads;
    const auto written = builder.write(output.file(file), write_options);
    manifest.shards.push_back({file, plan.rows, plan.first, written.bytes, written.header_hash});
    result.shards.push_back({file, plan.rows, written.bytes});
    result.bytes += written.bytes;
  }
  progress.finish();

  for (const auto& spec : specs) {
    shard::ManifestColumn column;
    column.name = spec.name;
    column.kind = spec.kind;
    column.dtype = spec.kind == ColumnKind::text ? DType::u8 : spec.dtype;
    column.rank = spec.kind == ColumnKind::text ? 1 : spec.rank;
    column.dim = spec.kind == ColumnKind::text ? 1 : spec.dim;
    column.padded_dim = spec.kind == ColumnKind::text ? 1 : spec.padded_dim;
    column.row_pitch_bytes = column.padded_dim * dtype_size(column.dtype);
    manifest.columns.push_back(column);
  }
  output.finish(shard::manifest_to_text(manifest));
  return result;
}

std::string PackResult::to_json() const {
  nlohmann::ordered_json json;
  json["ok"] = true;
  json["output"] = output_dir;
  json["input_rows"] = input_rows;
  json["rows"] = rows;
  json["bytes"] = bytes;
  json["resumed_shards"] = resumed_shards;
  json["shards"] = nlohmann::ordered_json::array();
  for (const auto& shard : shards)
    json["shards"].push_back({{"file", shard.file}, {"rows", shard.rows}, {"bytes", shard.bytes}});
  return json.dump(2);
}

std::string PackResult::to_text() const {
  return "packed " + std::to_string(rows) + " rows into " + std::to_string(shards.size()) +
         " shard" + (shards.size() == 1 ? "" : "s") + " (" + std::to_string(bytes) + " bytes) in " +
         output_dir;
}

}  // namespace gpucache
