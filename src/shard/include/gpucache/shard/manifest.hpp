// manifest.json (src/shard/SPEC.md, "manifest.json"): the list of shards with their sizes and
// header hashes, the columns, the inputs and the pack options, plus sections later stages add
// (validation results, sources). It hashes itself so an edit is detected.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
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

// A run of shards written by one pack run (a part of a merged dataset, or the rows one append
// added): their headers number them from 0 within the segment and carry its dataset fields
// (SPEC.md, "Segments"). A manifest without segments is one segment: the whole dataset.
struct ManifestSegment {
  std::uint64_t first_shard = 0;  // index into Manifest::shards
  std::uint32_t shard_count = 0;
  std::uint64_t first_row = 0;
  std::uint64_t rows = 0;
  std::uint64_t dataset_id = 0;  // the value in every header of the segment
  bool operator==(const ManifestSegment&) const = default;
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
  // Dates and times: what each i64 column's integers mean (one per column, nullopt for every other
  // column; empty when no column is one). Written as the column entry's "time" (SPEC.md).
  std::vector<std::optional<ColumnTime>> times;
  std::vector<ManifestShard> shards;
  // Empty for a dataset written by one pack run; otherwise they cover shards in order.
  std::vector<ManifestSegment> segments;
  std::vector<ManifestInput> inputs;
  nlohmann::ordered_json options = nlohmann::ordered_json::object();
  // Further top-level sections, written after the core keys in insertion order.
  nlohmann::ordered_json sections = nlohmann::ordered_json::object();
};

// Serialises with a trailing manifest_hash; the text is deterministic for equal manifests.
std::string manifest_to_text(const Manifest& manifest);
// Parses manifest text. Throws gpucache::Error(path, key, cause) for malformed content. Sets
// hash_ok to whether manifest_hash matches the content, and *recorded_hash (when given) to the
// manifest_hash the text carries ("" when none).
Manifest parse_manifest(const std::string& text, const std::string& path, bool& hash_ok,
                        std::string* recorded_hash = nullptr);
Manifest read_manifest(const std::string& path, bool& hash_ok);

// DIR/manifest.json read and parsed, with whether its hash matches. Throws Error for an unreadable
// or malformed manifest. Whether a hash that does not match is refused, and what else of the
// dataset is checked, is the dataset opener's (dataset_open.hpp), which every reader calls.
struct OpenedManifest {
  std::string path;  // DIR/manifest.json
  Manifest manifest;
  std::string recorded_hash;  // the manifest_hash the file carries
  bool hash_ok = false;
};
OpenedManifest open_manifest(const std::string& dir);

}  // namespace gpucache::shard
