// `gpucache export --to safetensors`: every chosen column in one .safetensors file
// (huggingface/safetensors: an 8-byte little-endian header length, a JSON header padded with
// spaces to a multiple of 8 bytes, then the tensors back to back without holes). The whole layout
// is known from the shards' tables before any data is read, so the header is written first and
// each tensor is filled at its own offset as the shards go by.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "export_writers.hpp"
#include "gpucache/common/atomic_file.hpp"
#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/error.hpp"

namespace gpucache::detail {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// The dtype names of the safetensors format, for every dtype a shard may hold (the dtype table's).
std::string safetensors_dtype(DType dtype) {
  if (const DTypeInfo* info = dtype_info(dtype)) return std::string(info->safetensors);
  throw Error("", "",
              "no safetensors dtype for dtype code " + std::to_string(static_cast<int>(dtype)));
}

// One tensor of the file: where its bytes go, relative to the data region.
struct PlannedTensor {
  ExportedArray array;
  DType dtype = DType::u8;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

std::uint64_t tensor_bytes(DType dtype, const std::vector<std::uint64_t>& shape,
                           const std::string& dataset, const std::string& name) {
  std::optional<std::uint64_t> bytes = dtype_size(dtype);
  for (std::uint64_t extent : shape)
    if (bytes) bytes = checked_mul(*bytes, extent);
  if (!bytes) throw Error(dataset, "column '" + name + "'", "size overflows 64 bits");
  return *bytes;
}

// The tensors in column order: NAME for a tensor column; NAME.values and NAME.offsets for a
// sequence; NAME.bytes and NAME.offsets for text.
std::vector<PlannedTensor> plan_tensors(const ExportSource& source) {
  std::vector<PlannedTensor> tensors;
  std::set<std::string> names{"__metadata__"};
  std::uint64_t cursor = 0;
  auto add = [&](const Column& column, const std::string& part, const std::string& name,
                 DType dtype, std::vector<std::uint64_t> shape) {
    if (!names.insert(name).second)
      throw Error(source.path(), "column '" + column.name + "'",
                  "would be written as tensor '" + name +
                      "', a name the file already holds (from another column, or __metadata__)");
    PlannedTensor tensor;
    tensor.array = {column.name, part, "", name, std::string(dtype_name(dtype)), shape, ""};
    tensor.dtype = dtype;
    tensor.begin = cursor;
    const auto end = checked_add(cursor, tensor_bytes(dtype, shape, source.path(), column.name));
    if (!end) throw Error(source.path(), "", "the export would exceed 2^64 bytes");
    tensor.end = cursor = *end;
    tensors.push_back(std::move(tensor));
  };
  for (const auto& chosen : source.columns()) {
    const Column& column = chosen.column;
    switch (column.kind) {
      case ColumnKind::tensor: {
        std::vector<std::uint64_t> shape{source.rows()};
        shape.insert(shape.end(), column.row_shape.begin(), column.row_shape.end());
        add(column, "data", column.name, column.dtype, shape);
        break;
      }
      case ColumnKind::sequence:
        add(column, "values", column.name + ".values", column.dtype, {chosen.values});
        add(column, "offsets", column.name + ".offsets", DType::i64, {source.rows() + 1});
        break;
      case ColumnKind::text:
        add(column, "bytes", column.name + ".bytes", DType::u8, {chosen.values});
        add(column, "offsets", column.name + ".offsets", DType::i64, {source.rows() + 1});
        break;
    }
  }
  return tensors;
}

// __metadata__ (string values only, as the format requires): where the data came from, and
// "gpucache.columns", a JSON text describing each column and the tensors it became, so a
// reader can tell a sequence's or a text column's pair of tensors from two plain tensors.
Json metadata(const ExportSource& source, const std::vector<PlannedTensor>& tensors) {
  Json columns = Json::array();
  for (const auto& chosen : source.columns()) {
    const Column& column = chosen.column;
    Json shape = Json::array({source.rows()});
    if (column.kind == ColumnKind::sequence) shape.push_back(nullptr);
    for (std::uint64_t extent : column.row_shape) shape.push_back(extent);
    Json entry{{"name", column.name},
               {"kind", std::string(column_kind_name(column.kind))},
               {"dtype", std::string(dtype_name(column.dtype))},
               {"shape", shape}};
    Json parts = Json::object();
    for (const auto& tensor : tensors)
      if (tensor.array.column == column.name) parts[tensor.array.part] = tensor.array.tensor;
    entry["tensors"] = parts;
    if (chosen.time)  // the manifest's "time": what the I64 values mean
      entry["time"] = {{"kind", std::string(time_kind_name(chosen.time->kind))},
                       {"unit", std::string(time_unit_name(chosen.time->unit))},
                       {"tz", chosen.time->tz.empty() ? Json(nullptr) : Json(chosen.time->tz)}};
    columns.push_back(entry);
  }
  Json result = Json::object();
  result["gpucache.version"] = GPUCACHE_VERSION;
  if (!source.manifest_hash().empty()) result["gpucache.manifest_hash"] = source.manifest_hash();
  result["gpucache.rows"] = std::to_string(source.rows());
  result["gpucache.columns"] = columns.dump();
  return result;
}

std::string header_text(const ExportSource& source, const std::vector<PlannedTensor>& tensors) {
  std::string text;
  try {
    Json header = Json::object();
    header["__metadata__"] = metadata(source, tensors);
    for (const auto& tensor : tensors)
      header[tensor.array.tensor] = Json{{"dtype", safetensors_dtype(tensor.dtype)},
                                         {"shape", tensor.array.shape},
                                         {"data_offsets", {tensor.begin, tensor.end}}};
    text = header.dump();
  } catch (const Json::type_error&) {
    // The shard format does not require UTF-8 names, but a JSON header can hold nothing else.
    throw Error(source.path(), "column names",
                "a name is not valid UTF-8, which a safetensors header cannot hold: export with "
                "--to npy");
  }
  // Padded with spaces so the data starts 8-byte aligned, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::string output_file(const ExportSource& source, const std::string& output) {
  if (output.empty()) throw UsageError("export needs an output file or directory");
  std::error_code error;
  if (output.back() == '/' || fs::is_directory(output, error))
    return (fs::path(output) / (source.name() + ".safetensors")).string();
  return output;
}

}  // namespace

ExportResult export_safetensors_file(const ExportSource& source, const std::string& output) {
  const std::string path = output_file(source, output);
  auto tensors = plan_tensors(source);
  const std::string header = header_text(source, tensors);
  const std::uint64_t data_start = 8 + header.size();
  const std::uint64_t file_size = data_start + (tensors.empty() ? 0 : tensors.back().end);

  std::error_code error;
  const auto parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, error);
  if (error) throw Error(parent.string(), "", "cannot create: " + error.message());
  AtomicFile file(path);
  file.preallocate(file_size);  // ENOSPC now rather than half way; a hint where unsupported
  std::array<std::byte, 8> length{};
  for (std::size_t i = 0; i < 8; ++i)
    length[i] = static_cast<std::byte>((header.size() >> (8 * i)) & 0xff);
  file.write_at(0, length);
  file.write_at(8, std::as_bytes(std::span(header.data(), header.size())));

  // Each column's tensors, in plan order: the data, or values (bytes) then offsets.
  std::vector<FileCursor> cursors;
  for (const auto& tensor : tensors) cursors.emplace_back(file, data_start + tensor.begin);
  const std::int64_t first = 0;  // row 0 starts at value 0; each shard then adds rows 1..rows
  for (std::size_t t = 0; t < tensors.size(); ++t)
    if (tensors[t].array.part == "offsets") cursors[t].write(std::as_bytes(std::span(&first, 1)));
  std::vector<std::uint64_t> values_before(source.columns().size(), 0);
  source.for_each_shard([&](const shard::ShardReader& shard) {
    std::size_t t = 0;
    for (std::size_t i = 0; i < source.columns().size(); ++i) {
      const ExportColumn& chosen = source.columns()[i];
      const std::size_t c = chosen.index;
      auto write_to = [&](FileCursor& cursor) {
        return [&cursor](Pieces pieces) { cursor.write(pieces); };
      };
      if (chosen.column.kind == ColumnKind::tensor) {
        tensor_pieces(shard, c, write_to(cursors[t++]));
        continue;
      }
      value_pieces(shard, c, write_to(cursors[t++]));
      FileCursor& offsets = cursors[t++];
      rebased_offsets(shard, c, values_before[i],
                      [&](std::span<const std::byte> block) { offsets.write(block); });
      values_before[i] += shard::offset_limit(shard.layout().columns[c]);
    }
  });
  // The plan came from the same shard headers the data was read under, so this holds; checked
  // anyway because a gap would be a file that readers refuse.
  for (std::size_t t = 0; t < tensors.size(); ++t)
    if (cursors[t].offset() != data_start + tensors[t].end)
      throw Error(path, "tensor '" + tensors[t].array.tensor + "'",
                  "wrote " + std::to_string(cursors[t].offset() - data_start - tensors[t].begin) +
                      " bytes where " + std::to_string(tensors[t].end - tensors[t].begin) +
                      " were planned");
  file.commit();

  ExportResult result;
  result.format = ExportFormat::safetensors;
  result.output = path;
  result.rows = source.rows();
  result.bytes = file_size;
  for (auto& tensor : tensors) {
    tensor.array.path = path;
    result.arrays.push_back(std::move(tensor.array));
  }
  return result;
}

}  // namespace gpucache::detail
