// Where the bytes of a copying load come from. A source reads the bytes a CopyPlan names, checks
// the hash of every chunk they touch exactly once (when the plan verifies; on CPU threads, while
// the copies run), and hands them to a Destination (destinations.hpp). Two sources:
// - MappedSource (source_mapped.hpp): the shard's memory mapping, registered as pinned memory so a
//   copy engine reads it in place (or, for a destination the CPU writes, copied from directly);
// - PreadSource (source_pread.hpp): parallel pread into a ring of staging buffers, for network
//   file systems and wherever registering fails.
// deliver_plan() is the choice ReadMode makes between them.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "cuda_api.hpp"
#include "destinations.hpp"
#include "gpucache/runtime.hpp"
#include "load_plan.hpp"

namespace gpucache::runtime::detail {

struct SourceOptions {
  const CudaApi* cuda = nullptr;            // for pinning memory that a destination's stream reads
  bool verify = true;                       // hash every chunk the copies touch, once
  unsigned threads = 1;                     // CPU threads for hashing and reading
  std::size_t staging_bytes = 16ull << 20;  // per staging buffer or window (raised to a chunk)
  std::string where;                        // "cuda:N", for errors
};
SourceOptions source_options(const CopyPlan& plan, const CudaApi& cuda, const std::string& where);

class Source {
 public:
  virtual ~Source() = default;
  // Hands the copies of `shards` to `destination`, shard by shard, and adds to `stats`. Returns how
  // many of the leading shards it delivered (a source may decline the rest, which another source
  // then delivers). On return, every copy of those shards has been written and has completed:
  // nothing reads the source's memory any more. Throws the first read, hash or CUDA error.
  virtual std::size_t deliver(std::span<const ShardCopies> shards, Destination& destination,
                              LoadStats& stats) = 0;
};

// Carries out `plan` into `destination` with the sources `mode` names: the mapping, falling back to
// pread from the first shard CUDA refuses to register (automatic); the mapping only
// (register_mmap); or pread only. Fills bytes_verified and the shard counts of the stats.
LoadStats deliver_plan(const CopyPlan& plan, ReadMode mode, Destination& destination,
                       const CudaApi& cuda, const std::string& where);

}  // namespace gpucache::runtime::detail
