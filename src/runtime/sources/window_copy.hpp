// The CPU half of the sources: each shard's selected bytes are cut into windows of whole chunks,
// and worker threads take a window each: they get its bytes (in place from the mapping, or with
// pread into a staging buffer), hash its chunks, and write the selected bytes to the destination.
#pragma once

#include <cstdint>
#include <span>

#include "destinations.hpp"
#include "load_plan.hpp"
#include "sources.hpp"

namespace gpucache::runtime::detail {

enum class WindowRead {
  in_place,  // from the mapping; only for destinations without a stream (nothing is pinned)
  pread,     // into a StagingRing, pinned and fenced when the destination has a stream
};

// Returns the bytes verified once every window is written and its copies have completed; throws
// the first read, hash or CUDA error after every worker stopped.
std::uint64_t copy_windows(std::span<const ShardCopies> shards, Destination& destination,
                           const SourceOptions& options, WindowRead read);

}  // namespace gpucache::runtime::detail
