// When shards form one dataset (SPEC.md "Dataset fields (1.1)" and "manifest.json"): the rules
// that verify, pack --resume and the runtime reader (and through it the C ABI and Python) apply,
// written once. Checks report problems instead of throwing, so verify can list every one; the
// runtime throws the first (throw_first).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard/shard_layout.hpp"

namespace gpucache::shard {

struct DatasetProblem {
  std::string file;      // shard file name, the manifest's name, or the dataset path
  std::string location;  // "header byte 40", "shards[3]", ...
  std::string cause;
};

// One shard as found: its name (as problems should show it) and its decoded layout.
struct FoundShard {
  std::string file;
  const Layout* layout = nullptr;
};

// Where a shard belongs in its dataset, as a plan or a manifest says. The dataset fields are
// compared only for shards that have them (version 1.1 on).
struct ShardPlace {
  std::uint32_t index = 0;
  std::uint64_t first_row = 0;
  std::uint64_t rows = 0;
  std::uint32_t shard_count = 0;
  std::uint64_t dataset_rows = 0;
  std::optional<std::uint64_t> dataset_id;   // when known (a plan knows it, a manifest not)
  std::optional<std::uint64_t> header_hash;  // when known (a manifest records it, a plan not)
};

// The cause when `header` does not sit at `place`; nothing when it does.
std::optional<std::string> place_mismatch(const Header& header, const ShardPlace& place);

// The shards among themselves, ordered by index: indices 0..n-1 without gaps or repeats, rows
// contiguous, the same columns as the first, the same dataset fields, and as many shards and rows
// as those fields say. `dataset` names the whole dataset in problems that belong to no shard.
void check_shard_set(std::span<const FoundShard> shards, const std::string& dataset,
                     std::vector<DatasetProblem>& problems);

// The manifest's shard list on its own: first rows contiguous and adding up to its rows. Which
// listed files are on disk is the opener's (dataset_open.hpp).
void check_manifest_rows(const Manifest& manifest, std::vector<DatasetProblem>& problems);

// Where the manifest says the header of its shard `index` places it: the dataset position, or,
// in a manifest with segments, the position within the shard's segment with the segment's dataset
// fields and id. The header hash is included.
ShardPlace manifest_place(const Manifest& manifest, std::size_t index);

// One shard against the manifest's entry `index`: header hash, rows, first row, index, dataset
// fields and columns.
void check_shard_against_manifest(const FoundShard& shard, const Manifest& manifest,
                                  std::size_t index, std::vector<DatasetProblem>& problems);

// Throws the first problem as gpucache::Error (prefixing `directory/` to a shard's name); does
// nothing when there is none.
void throw_first(const std::vector<DatasetProblem>& problems, const std::string& directory);

}  // namespace gpucache::shard
