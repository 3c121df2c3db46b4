// manifest.json (src/shard/SPEC.md, "manifest.json"): the list of shards with their sizes and
// header hashes, the columns, the inputs and the pack options, plus sections later stages add
// (validation results, sources). It hashes itself so an edit is detected.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpucache/shard/dataset_files.hpp"
#include "gpucache/shard/shard_layout.hpp"

namespace gpucache::shard {

inline constexpr const char* kManifestFormat = "gpucache-dataset";

struct ManifestColumn {
  std::string name;
  ColumnKind kind = ColumnKind::tensor;
  DType dtype = DType::f32;
  std::uint8_t rank = 2;
  std::uint64_t dim = 1;
  std::uint64_t padded_dim = 1;
  std::uint64_t row_pitch_bytes = 0;
};

struct ManifestShard {
  std::string file;
  std::uint64_t rows = 0;
  std::uint64_t first_row = 0;
  std::uint64_t bytes = 0;
  std::uint64_t header_hash = 0;
};

struct ManifestInput {
  std::string path;
  std::uint64_t bytes = 0;
  std::uint64_t xxh3 = 0;
};

struct Manifest {
  std::string tool_version;
  std::uint64_t rows = 0;
  std::vector<ManifestColumn> columns;
  std::vector<ManifestShard> shards;
  std::vector<ManifestInput> inputs;
  nlohmann::ordered_json options = nlohmann::ordered_json::object();
  // Further top-level sections, written after the core keys in insertion order.
  nlohmann::ordered_json sections = nlohmann::ordered_json::object();
};

// Serialises with a trailing manifest_hash; the text is deterministic for equal manifests.
std::string manifest_to_text(const Manifest& manifest);
// Parses manifest text. Throws gpucache::Error(path, key, cause) for malformed content. Sets
// hash_ok to whether manifest_hash matches the content.
Manifest parse_manifest(const std::string& text, const std::string& path, bool& hash_ok);
Manifest read_manifest(const std::string& path, bool& hash_ok);

std::string hex64(std::uint64_t value);
// "tensor"/"text".
std::string_view column_kind_name(ColumnKind kind) noexcept;

}  // namespace gpucache::shard
