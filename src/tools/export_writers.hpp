// The two output formats of `gpucache export` (gpucache/export.hpp describes what each writes).
// Both read the dataset in one pass, shard by shard, and fill all their files as they go.
#pragma once

#include <string>

#include "export_source.hpp"
#include "gpucache/export.hpp"

namespace gpucache::detail {

ExportResult export_npy_files(const ExportSource& source, const std::string& directory);
ExportResult export_safetensors_file(const ExportSource& source, const std::string& output);

}  // namespace gpucache::detail
