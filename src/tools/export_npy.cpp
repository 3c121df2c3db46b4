// `gpucache export --to npy`: one .npy file per array (a sequence column has two) and a .jsonl
// file per text column, in one directory, all filled in one pass over the shards.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "export_writers.hpp"
#include "gpucache/common/atomic_file.hpp"
#include "gpucache/common/float_convert.hpp"
#include "gpucache/error.hpp"
#include "gpucache/npy.hpp"

namespace gpucache::detail {
namespace {

namespace fs = std::filesystem;

// Bytes buffered before a write: converted floats, JSON lines.
constexpr std::size_t kBufferBytes = 8u << 20;

// numpy has no bf16: it is widened to f32, which holds every bf16 value exactly.
DType npy_dtype(const ExportColumn& chosen, const std::string& dataset) {
  const DType dtype = chosen.column.dtype;
  if (dtype == DType::fp8_e4m3 || dtype == DType::fp8_e5m2)
    throw Error(
        dataset, "column '" + chosen.column.name + "'",
        std::string(dtype_name(dtype)) + " has no numpy dtype: export it with --to safetensors");
  return dtype == DType::bf16 ? DType::f32 : dtype;
}

std::string widened_note(DType from, DType to) {
  if (from == to) return "";
  return std::string(dtype_name(from)) + " widened to " + std::string(dtype_name(to)) +
         ": numpy has no " + std::string(dtype_name(from));
}

// One output file and the array it holds.
struct NpyOutput {
  ExportedArray array;
  std::unique_ptr<AtomicFile> file;
  std::unique_ptr<FileCursor> cursor;
  DType stored = DType::u8;   // the dtype the shard holds
  DType written = DType::u8;  // the dtype the file holds: stored, or f32 for bf16
};

NpyOutput open_output(const fs::path& directory, ExportedArray array, DType stored, DType written,
                      std::string prefix) {
  NpyOutput output;
  array.path = (directory / array.path).string();
  output.array = std::move(array);
  output.file = std::make_unique<AtomicFile>(output.array.path);
  output.cursor = std::make_unique<FileCursor>(*output.file, 0);
  output.cursor->write(std::as_bytes(std::span(prefix.data(), prefix.size())));
  output.stored = stored;
  output.written = written;
  return output;
}

NpyOutput open_array(const fs::path& directory, const std::string& column, const std::string& part,
                     const std::string& file_name, DType stored, DType written,
                     std::vector<std::uint64_t> shape,
                     const std::optional<ColumnTime>& time = std::nullopt) {
  ExportedArray array{column,
                      part,
                      file_name,
                      "",
                      std::string(dtype_name(written)),
                      shape,
                      widened_note(stored, written)};
  if (!time)
    return open_output(directory, std::move(array), stored, written, npy_prefix(written, shape));
  // Dates and times: the same int64 values, typed as numpy datetime64 (timestamps, dates) or
  // timedelta64 (durations, times of day: numpy has no time-of-day type) of the recorded unit.
  const bool instant = time->kind == TimeKind::timestamp || time->kind == TimeKind::date;
  const std::string descr =
      std::string(instant ? "<M8[" : "<m8[") + std::string(time_unit_name(time->unit)) + "]";
  array.dtype = std::string(instant ? "datetime64[" : "timedelta64[") +
                std::string(time_unit_name(time->unit)) + "]";
  array.note = describe_time(*time) + " as numpy " + array.dtype;
  if (!time->tz.empty()) array.note += " (instants in UTC; numpy has no time zones)";
  if (time->kind == TimeKind::time) array.note += " since midnight";
  return open_output(directory, std::move(array), stored, written, npy_prefix(descr, shape));
}

// Writes pieces as they are, or widened to f32 through a buffer.
class ArrayWriter {
 public:
  void write(NpyOutput& output, Pieces pieces) {
    if (output.written == output.stored) {
      output.cursor->write(pieces);
      return;
    }
    const std::size_t size = dtype_size(output.stored);
    for (const auto& piece : pieces) {
      for (std::size_t done = 0; done + size <= piece.size();) {
        if (widened_.size() == kBufferBytes / 4) flush(output);
        const std::size_t count =
            std::min((piece.size() - done) / size, kBufferBytes / 4 - widened_.size());
        const std::size_t at = widened_.size();
        widened_.resize(at + count);
        widen_to_f32(output.stored, piece.data() + done, widened_.data() + at, count);
        done += count * size;
      }
    }
  }
  void flush(NpyOutput& output) {
    if (widened_.empty()) return;
    output.cursor->write(std::as_bytes(std::span(widened_)));
    widened_.clear();
  }

 private:
  std::vector<float> widened_;
};

void write_text(NpyOutput& output, const shard::ShardReader& shard, std::size_t column) {
  std::string lines;
  auto flush = [&] {
    output.cursor->write(std::as_bytes(std::span(lines.data(), lines.size())));
    lines.clear();
  };
  for (std::uint64_t r = 0; r < shard.rows(); ++r) {
    // Invalid UTF-8 becomes U+FFFD rather than stopping the export.
    lines += nlohmann::json(std::string(shard.text(column, r)))
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    lines += '\n';
    if (lines.size() >= kBufferBytes) flush();
  }
  flush();
}

// The column's outputs: one for a tensor or text column, values then offsets for a sequence.
std::vector<NpyOutput> open_column(const fs::path& directory, const ExportSource& source,
                                   const ExportColumn& chosen) {
  const Column& column = chosen.column;
  std::vector<NpyOutput> outputs;
  if (column.kind == ColumnKind::text) {
    ExportedArray array{column.name, "text", column.name + ".jsonl", "", "", {source.rows()}, ""};
    outputs.push_back(open_output(directory, std::move(array), DType::u8, DType::u8, ""));
    return outputs;
  }
  const DType written = npy_dtype(chosen, source.path());
  if (column.kind == ColumnKind::tensor) {
    std::vector<std::uint64_t> shape{source.rows()};
    shape.insert(shape.end(), column.row_shape.begin(), column.row_shape.end());
    outputs.push_back(open_array(directory, column.name, "data", column.name + ".npy", column.dtype,
                                 written, shape, chosen.time));
    return outputs;
  }
  outputs.push_back(open_array(directory, column.name, "values", column.name + ".values.npy",
                               column.dtype, written, {chosen.values}));
  outputs.push_back(open_array(directory, column.name, "offsets", column.name + ".offsets.npy",
                               DType::i64, DType::i64, {source.rows() + 1}));
  const std::int64_t first = 0;  // row 0 starts at value 0; each shard then adds rows 1..rows
  outputs.back().cursor->write(std::as_bytes(std::span(&first, 1)));
  return outputs;
}

}  // namespace

ExportResult export_npy_files(const ExportSource& source, const std::string& directory) {
  if (directory.empty()) throw UsageError("export needs an output directory");
  std::set<std::string> names;
  for (const auto& chosen : source.columns()) {
    const std::string& name = chosen.column.name;
    if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos)
      throw Error(source.path(), "column '" + name + "'",
                  "its name cannot be a file name: export it with --to safetensors");
    const std::vector<std::string> files =
        chosen.column.kind == ColumnKind::sequence
            ? std::vector<std::string>{name + ".values.npy", name + ".offsets.npy"}
            : std::vector<std::string>{
                  name + (chosen.column.kind == ColumnKind::text ? ".jsonl" : ".npy")};
    for (const auto& file : files)
      if (!names.insert(file).second)
        throw Error(source.path(), "column '" + name + "'",
                    "would write " + file + ", which another column writes too");
  }
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) throw Error(directory, "", "cannot create: " + error.message());

  std::vector<std::vector<NpyOutput>> outputs;
  for (const auto& chosen : source.columns())
    outputs.push_back(open_column(directory, source, chosen));
  std::vector<std::uint64_t> values_before(outputs.size(), 0);
  ArrayWriter writer;
  source.for_each_shard([&](const shard::ShardReader& shard) {
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const ExportColumn& chosen = source.columns()[i];
      const std::size_t c = chosen.index;
      auto& files = outputs[i];
      switch (chosen.column.kind) {
        case ColumnKind::text:
          write_text(files[0], shard, c);
          break;
        case ColumnKind::tensor:
          tensor_pieces(shard, c, [&](Pieces pieces) { writer.write(files[0], pieces); });
          writer.flush(files[0]);
          break;
        case ColumnKind::sequence:
          value_pieces(shard, c, [&](Pieces pieces) { writer.write(files[0], pieces); });
          writer.flush(files[0]);
          rebased_offsets(shard, c, values_before[i],
                          [&](std::span<const std::byte> block) { files[1].cursor->write(block); });
          values_before[i] += shard::offset_limit(shard.layout().columns[c]);
          break;
      }
    }
  });

  ExportResult result;
  result.format = ExportFormat::npy;
  result.output = directory;
  result.rows = source.rows();
  for (auto& files : outputs)
    for (auto& output : files) {
      output.file->commit();
      result.bytes += output.cursor->offset();
      result.arrays.push_back(std::move(output.array));
    }
  return result;
}

}  // namespace gpucache::detail
