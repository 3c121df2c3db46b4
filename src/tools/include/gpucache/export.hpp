// `gpucache export`: writes a dataset's columns back out as plain files, so data is never locked
// in. Two formats:
//   npy          one file per array in a directory: a tensor column as NAME.npy with its logical
//                shape [rows, *row_shape] (padding stripped; bf16 widened to f32, numpy has no
//                bf16), a sequence column as NAME.values.npy (its values, concatenated) and
//                NAME.offsets.npy (rows + 1 int64), a text column as NAME.jsonl.
//   safetensors  one file holding every column: a tensor column as tensor NAME with its logical
//                shape and dtype (bf16 stays BF16), a sequence column as NAME.values and
//                NAME.offsets (I64), a text column as NAME.bytes (U8, UTF-8) and NAME.offsets.
// docs/cli.md ("gpucache export") is the user's description of both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpucache {

enum class ExportFormat { npy, safetensors };

// "npy", "safetensors".
std::string_view export_format_name(ExportFormat format) noexcept;
std::optional<ExportFormat> parse_export_format(std::string_view name) noexcept;

struct ExportOptions {
  ExportFormat format = ExportFormat::npy;
  // npy: the directory to write into (created when missing). safetensors: the file to write, or a
  // directory (an existing one, or a path ending in '/') to write DATASET_NAME.safetensors into.
  std::string output;
  std::vector<std::string> columns;  // empty: every column, in the dataset's order
  unsigned threads = 0;              // for checking chunk hashes; 0: one per core
};

// One array written: a .npy file, a .jsonl file, or a tensor inside the safetensors file.
struct ExportedArray {
  std::string column;
  // What of the column it holds: "data" (a tensor column), "values" and "offsets" (a sequence),
  // "bytes" and "offsets" (text in safetensors), "text" (text as JSON lines).
  std::string part;
  std::string path;
  std::string tensor;  // safetensors: the tensor's name in the file; empty otherwise
  std::string dtype;   // as written, in gpucache's spelling ("f32", "bf16", ...); empty for text
  std::vector<std::uint64_t> shape;
  std::string note;  // e.g. "bf16 widened to f32 (numpy has no bf16)"
};

struct ExportResult {
  ExportFormat format = ExportFormat::npy;
  std::string output;  // the directory (npy) or the file (safetensors) written
  std::uint64_t rows = 0;
  std::uint64_t bytes = 0;  // written, over every file
  std::vector<ExportedArray> arrays;
  // {"ok", "format", "output", "rows", "bytes", "files": [{"column", "part", "path", "tensor"
  // (safetensors), "dtype", "shape", "note" (when there is one)}]}
  std::string to_json() const;
  std::string to_text() const;
};

// Reads the dataset (a directory with manifest.json, or one shard file) shard by shard, checking
// every chunk hash and the dataset's shards against its manifest as it goes: corrupt data is an
// error and nothing is exported. Memory stays bounded by one shard (a compressed shard is
// decompressed whole) plus small write buffers, whatever the dataset's size. Every output file is
// written under a temporary name and renamed into place only when all of them are complete.
ExportResult export_dataset(const std::string& dataset, const ExportOptions& options);

}  // namespace gpucache
