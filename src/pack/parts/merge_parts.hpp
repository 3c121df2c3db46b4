// What merge and pack --append share: reading a finished dataset as a part (manifest and every
// shard's header checked against it), refusing parts that differ in columns or options, and
// combining parts into one manifest whose segments keep each part's shards as they are.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpucache/shard/manifest.hpp"

namespace gpucache::detail {

struct DatasetPart {
  std::string dir;
  shard::Manifest manifest;
  std::string manifest_hash;                     // as recorded, for provenance
  std::vector<shard::ManifestSegment> segments;  // the manifest's, or the one implied
  std::vector<std::string> unlisted;             // shard files in `dir` the manifest does not list
};

// Reads a finished dataset, opened in the listed mode (gpucache/shard/dataset_open.hpp). Throws
// gpucache::Error naming the part for what that mode refuses (a missing or edited manifest, a
// listed shard missing or of another size), a shard whose header disagrees with the manifest, or
// shards without dataset fields (1.0).
DatasetPart read_part(const std::string& dir);

// The options that must agree between parts: the recorded ones without "part".
nlohmann::ordered_json comparable_options(const nlohmann::ordered_json& options);
// The options that say how the stored columns were asked for (--dtype, --dtype COLUMN=TYPE,
// --role, --input-map), not what is stored: parts and --append compare the stored columns (names,
// dtypes, shapes), roles and checks instead, so an f16 input appended with --dtype f32 to a
// dataset whose f32 columns needed no option joins it, and so do new inputs of another layout
// mapped by their own --input-map to the columns the dataset has. (--resume compares them all.)
inline constexpr const char* kAskedStorageOptions[] = {"dtype", "column_dtypes", "roles",
                                                       "input_map"};
// comparable_options without kAskedStorageOptions: what check_same_options compares.
nlohmann::ordered_json compared_options(const nlohmann::ordered_json& options);
// Throws gpucache::Error naming the first difference in columns (a column in another dtype: its
// name, both dtypes and the --dtype that stores it as `first` does), roles or options.
void check_same_layout(const DatasetPart& first, const DatasetPart& other);
// Throws gpucache::Error naming the first option that differs ("dataset" and "this run" as the
// sides' names), comparing compared_options.
void check_same_options(const nlohmann::ordered_json& expected, const nlohmann::ordered_json& got,
                        const std::string& where, const std::string& expected_name,
                        const std::string& got_name);

// One manifest for the parts in order: shards numbered from 0 across them, segments, inputs,
// options, summed drop counts and statistics, and a "merge" section naming every part.
shard::Manifest combine_parts(const std::vector<DatasetPart>& parts);

}  // namespace gpucache::detail
