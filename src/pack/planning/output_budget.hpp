// What a pack run will write, checked before it writes anything: the bytes and rows of its output
// against the free space of the output file system and the --max-output cap (docs/cli.md,
// "Resource bounds"). Checked twice: an upper bound from the input row count before validation
// (so a view of 2^40 repeated rows is refused at once, not after a validation pass over them), and
// the exact size of the planned shards before the first one is written.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpucache/column.hpp"
#include "pack_inputs.hpp"
#include "pack_plan.hpp"

namespace gpucache::detail {

// The exact bytes on disk of the planned shards of one dataset, uncompressed (a zstd shard is at
// most its uncompressed size: a chunk that does not shrink is stored raw).
std::uint64_t planned_shard_bytes(const std::vector<Column>& specs,
                                  const std::vector<ShardPlan>& plans);

// What the output will take, and of which estimate.
struct OutputSize {
  std::uint64_t bytes = 0;
  std::uint64_t rows = 0;
  std::uint64_t shards = 0;  // 0 before validation
  // Counted before validation (output_size_bound): rows at most, bytes at least for those rows.
  bool before_validation = false;
};

// Before validation: the most rows the output can have (every input row kept, up to --max-rows
// and --sample per input), and the bytes their fixed parts take at least (row pitches of every
// column, 8 bytes of offsets per text or sequence column; values and per-shard tables not
// counted). Saturates at UINT64_MAX.
OutputSize output_size_bound(const std::vector<Column>& specs, const PackInputs& inputs,
                             const PackOptions& options);

// Bytes that an unprivileged writer may still use on the file system that will hold `dir`:
// statvfs(f_bavail * f_frsize) of its nearest existing ancestor. Tests set
// GPUCACHE_TEST_FREE_BYTES to a byte count to stand in for it (docs/cli.md).
std::uint64_t free_output_bytes(const std::string& dir);

// Throws gpucache::Error (one line, both figures in binary units, what to do) when `size` is over
// options.max_output, or more than the free space of each output directory's file system (plus
// the dataset files there that --force replaces or --resume reuses) less free_space_margin.
// `dataset_dirs`: the directories the run writes (one per split).
void check_output_size(const OutputSize& size, const std::vector<std::string>& dataset_dirs,
                       const PackOptions& options);

// The free space a run of `shards` shards leaves beside them, for the manifest, the pack plan and
// the file system: 1 MiB + 1 KiB per shard.
std::uint64_t free_space_margin(std::uint64_t shards);

// Throws gpucache::Error unless `bytes` fit in the free space of `dir`'s file system plus
// `replaced_bytes` (files the run removes first), less `margin`. `what` starts the message ("the
// 10 rows make 1.0 GiB of shards"), `note` goes after the figures.
void check_free_space(std::uint64_t bytes, std::uint64_t margin, const std::string& dir,
                      const std::string& what, const std::string& note = "",
                      std::uint64_t replaced_bytes = 0);

// Where the output goes: output_dir, or output_dir/NAME for each split.
std::vector<std::string> output_dataset_dirs(const PackOptions& options);

// The two checks pack makes. Before validation: output_size_bound.
void check_output_bound(const std::vector<Column>& specs, const PackInputs& inputs,
                        const PackOptions& options);
// Before the first shard is written: the planned shards of every dataset (one per split).
void check_planned_output(const std::vector<Column>& specs,
                          const std::vector<const std::vector<ShardPlan>*>& datasets,
                          const PackOptions& options);

}  // namespace gpucache::detail
