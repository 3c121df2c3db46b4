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
  std::vector<Column> columns;
  // What each column is for (one per column); empty in manifests written before roles existed.
  std::vector<ColumnRole> roles;
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


}  // namespace gpucache::shard
