#include "gpucache/shard/dataset_check.hpp"

#include <algorithm>

#include "gpucache/common/hash.hpp"
#include "gpucache/error.hpp"

namespace gpucache::shard {
namespace {

std::string rows_text(std::uint64_t first, std::uint64_t rows) {
  return "rows " + std::to_string(first) + "-" + std::to_string(first + rows);
}

bool same_columns(const std::vector<ColumnEntry>& entries, const std::vector<Column>& columns) {
  return entries.size() == columns.size() &&
         std::equal(entries.begin(), entries.end(), columns.begin(),
                    [](const ColumnEntry& entry, const Column& column) {
                      return static_cast<const Column&>(entry) == column;
                    });
}

}  // namespace

std::optional<std::string> place_mismatch(const Header& header, const ShardPlace& place) {
  if (place.header_hash && header.header_hash != *place.header_hash)
    return "header hash " + detail::hex64(header.header_hash) + " differs from the recorded " +
           detail::hex64(*place.header_hash) + " (shard replaced or swapped?)";
  if (header.shard_index != place.index || header.first_row != place.first_row ||
      header.row_count != place.rows)
    return "is shard " + std::to_string(header.shard_index) + " with " +
           rows_text(header.first_row, header.row_count) + " but belongs at shard " +
           std::to_string(place.index) + " with " + rows_text(place.first_row, place.rows) +
           " (shard swapped?)";
  if (!header.has_dataset_fields()) {
    if (place.dataset_id) return "is a version 1.0 shard without dataset fields";
    return std::nullopt;
  }
  if (header.shard_count != place.shard_count || header.dataset_rows != place.dataset_rows)
    return "its header says the dataset has " + std::to_string(header.shard_count) +
           " shards and " + std::to_string(header.dataset_rows) + " rows, not " +
           std::to_string(place.shard_count) + " and " + std::to_string(place.dataset_rows);
  if (place.dataset_id && header.dataset_id != *place.dataset_id)
    return "belongs to another dataset (its dataset id differs)";
  return std::nullopt;
}

void check_shard_set(std::span<const FoundShard> shards, const std::string& dataset,
                     std::vector<DatasetProblem>& problems) {
  if (shards.empty()) return;
  const FoundShard& first = shards.front();
  const Header& first_header = first.layout->header;
  std::uint64_t next_row = 0;
  for (std::size_t k = 0; k < shards.size(); ++k) {
    const FoundShard& shard = shards[k];
    const Header& header = shard.layout->header;
    if (header.shard_index != k) {
      const bool repeated = k > 0 && shards[k - 1].layout->header.shard_index == header.shard_index;
      problems.push_back({shard.file, "header byte 40",
                          repeated
                              ? "shard index " + std::to_string(header.shard_index) +
                                    " appears twice (also in " + shards[k - 1].file + ")"
                              : "shard index " + std::to_string(k) +
                                    " is missing: the dataset is incomplete (this shard is index " +
                                    std::to_string(header.shard_index) + ")"});
      return;  // every later index is off by the same gap
    }
    if (header.first_row != next_row)
      problems.push_back({shard.file, "header byte 32",
                          "first_row is " + std::to_string(header.first_row) +
                              " but the shards before it end at row " + std::to_string(next_row) +
                              ": rows are missing or repeated"});
    const auto& columns = shard.layout->columns;
    const auto& first_columns = first.layout->columns;
    if (columns.size() != first_columns.size()) {
      problems.push_back({shard.file, "header byte 44",
                          "has " + std::to_string(columns.size()) + " columns but " + first.file +
                              " has " + std::to_string(first_columns.size())});
    } else {
      for (std::size_t c = 0; c < columns.size(); ++c)
        if (!(static_cast<const Column&>(columns[c]) == first_columns[c]))
          problems.push_back({shard.file, "column table entry " + std::to_string(c),
                              "column " + describe_column(columns[c]) + " differs from " +
                                  describe_column(first_columns[c]) + " in " + first.file});
    }
    // Version 1.1 shards name their dataset, so a shard from another pack of the same shape is
    // caught without the manifest.
    if (header.has_dataset_fields() != first_header.has_dataset_fields() ||
        header.dataset_id != first_header.dataset_id)
      problems.push_back({shard.file, "header byte 152",
                          "belongs to another dataset than " + first.file +
                              " (its dataset id differs): shards from different packs were mixed"});
    else if (header.shard_count != first_header.shard_count ||
             header.dataset_rows != first_header.dataset_rows)
      problems.push_back(
          {shard.file, "header byte 136",
           "disagrees with " + first.file + " on the dataset's shard count or rows"});
    next_row = header.first_row + header.row_count;
  }
  if (!first_header.has_dataset_fields()) return;  // version 1.0: only the manifest can tell
  if (shards.size() != first_header.shard_count) {
    if (shards.size() < first_header.shard_count)
      problems.push_back({dataset, shard_file_name(static_cast<std::uint32_t>(shards.size())),
                          "missing: the shards say the dataset has " +
                              std::to_string(first_header.shard_count) + " shards but " +
                              std::to_string(shards.size()) + " are present"});
    else
      problems.push_back({dataset, "",
                          std::to_string(shards.size()) +
                              " shards are present but their headers "
                              "say the dataset has " +
                              std::to_string(first_header.shard_count)});
  } else if (next_row != first_header.dataset_rows) {
    problems.push_back({dataset, "",
                        "the shards hold " + std::to_string(next_row) +
                            " rows but their headers say the dataset has " +
                            std::to_string(first_header.dataset_rows)});
  }
}

void check_manifest_rows(const Manifest& manifest, std::vector<DatasetProblem>& problems) {
  std::uint64_t expected_first = 0;
  for (std::size_t i = 0; i < manifest.shards.size(); ++i) {
    const auto& listed = manifest.shards[i];
    if (listed.first_row != expected_first)
      problems.push_back({kManifestName, "shards[" + std::to_string(i) + "]",
                          "first_row does not follow the previous shard"});
    expected_first = listed.first_row + listed.rows;
  }
  if (expected_first != manifest.rows)
    problems.push_back({kManifestName, "rows", "total rows do not match the shards listed"});
}

ShardPlace manifest_place(const Manifest& manifest, std::size_t index) {
  const ManifestShard& entry = manifest.shards[index];
  ShardPlace place;
  place.index = static_cast<std::uint32_t>(index);
  place.first_row = entry.first_row;
  place.rows = entry.rows;
  place.shard_count = static_cast<std::uint32_t>(manifest.shards.size());
  place.dataset_rows = manifest.rows;
  place.header_hash = entry.header_hash;
  const auto segment =
      std::find_if(manifest.segments.begin(), manifest.segments.end(), [&](const auto& candidate) {
        return index >= candidate.first_shard &&
               index < candidate.first_shard + candidate.shard_count;
      });
  if (segment != manifest.segments.end()) {
    place.index = static_cast<std::uint32_t>(index - segment->first_shard);
    place.first_row = entry.first_row - segment->first_row;
    place.shard_count = segment->shard_count;
    place.dataset_rows = segment->rows;
    place.dataset_id = segment->dataset_id;
  }
  return place;
}

void check_shard_against_manifest(const FoundShard& shard, const Manifest& manifest,
                                  std::size_t index, std::vector<DatasetProblem>& problems) {
  const ShardPlace place = manifest_place(manifest, index);
  if (auto cause = place_mismatch(shard.layout->header, place))
    problems.push_back({shard.file, "header", *cause + " according to " + kManifestName});
  if (!same_columns(shard.layout->columns, manifest.columns))
    problems.push_back({shard.file, "column table", "columns differ from the manifest"});
}

void throw_first(const std::vector<DatasetProblem>& problems, const std::string& directory) {
  if (problems.empty()) return;
  const DatasetProblem& first = problems.front();
  const bool in_directory = !directory.empty() && first.file != directory;
  throw Error(in_directory ? directory + "/" + first.file : first.file, first.location,
              first.cause);
}

}  // namespace gpucache::shard
