// `pack --part K/N`: which share of the inputs partition K of N packs (docs/scale.md,
// "Partitioning"). The rule depends only on the input paths, their row counts and N, so every
// machine computes the same parts:
//   - inputs are taken in bytewise-sorted path order;
//   - with F >= N files, part K packs files [floor(K·F/N), floor((K+1)·F/N)), whole;
//   - with fewer files than parts, the rows of the sorted files are seen as one table of T rows
//     and part K packs rows [floor(K·T/N), floor((K+1)·T/N)) of it, as row ranges of the files.
// Merging the parts in order K = 0..N-1 gives the rows in the order one pack of the sorted inputs
// keeps them (row checks, dedup and shuffle apply within each part).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpucache/pack.hpp"
#include "pack_source.hpp"

namespace gpucache::detail {

// The inputs sorted, then, for whole-file parts, only this part's files.
std::vector<std::string> part_input_files(const std::vector<std::string>& inputs,
                                          const PartSpec& part);
// True when the part packs row ranges (fewer files than parts).
bool part_uses_row_ranges(std::size_t input_count, const PartSpec& part);
// Keeps this part's rows of the sources of every (sorted) input: windows of the sources, with
// their input index and first input row set. Throws UsageError when the inputs have fewer rows
// than there are parts.
std::vector<Source> part_row_ranges(std::vector<Source> sources, const PartSpec& part);
// The manifest's "part" section: the rule used and the share packed.
nlohmann::ordered_json part_section(const std::vector<Source>& sources, std::size_t input_count,
                                    const PartSpec& part);

}  // namespace gpucache::detail
