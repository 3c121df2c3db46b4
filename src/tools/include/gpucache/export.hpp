// `gpucache export`: writes a dataset's columns back out as plain files, so data is never locked
// in. Numeric columns become .npy with their logical shape (padding stripped); text columns
// become JSON lines, one string per row.
#pragma once

#include <string>
#include <vector>

namespace gpucache {

struct ExportOptions {
  std::string output_dir;
  std::vector<std::string> columns;  // empty: every column
  unsigned threads = 0;
};

struct ExportedFile {
  std::string column;
  std::string path;
  std::string note;  // e.g. "bf16 widened to f32: numpy has no bf16"
};

struct ExportResult {
  std::vector<ExportedFile> files;
  std::string to_json() const;
  std::string to_text() const;
};

// Every shard's chunks are verified while reading; corruption is an error, never exported.
ExportResult export_npy(const std::string& dataset, const ExportOptions& options);

}  // namespace gpucache
