// The copy path that does not need a registered mapping: shards are cut into windows of whole
// chunks, worker threads read each window (parallel pread into a ring of reused buffers, or
// straight from the mapping), hash its chunks, and hand the selected bytes to a sink, either
// cudaMemcpyAsync from pinned staging buffers or memcpy into pinned host memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "chunk_verify.hpp"
#include "cuda_api.hpp"
#include "dataset_state.hpp"

namespace gpucache::runtime::detail {

// `bytes` bytes from file offset `source` go to byte `destination` of the target allocation.
struct CopyItem {
  std::uint64_t source = 0;
  std::uint64_t destination = 0;
  std::uint64_t bytes = 0;
};

struct StagedShard {
  const MappedShard* shard = nullptr;
  std::vector<CopyItem> copies;  // sorted by source
};

struct StagedOptions {
  bool read_with_pread = true;  // false: read the windows from the mapping
  bool verify = true;
  unsigned threads = 1;
  std::size_t staging_bytes = 16ull << 20;
  // The sink: with `cuda` set, cudaMemcpyAsync on `stream` from pinned staging buffers into
  // device memory; otherwise memcpy into host memory.
  const CudaApi* cuda = nullptr;
  cuda_stream_t stream = nullptr;
  std::byte* target = nullptr;
};

struct StagedResult {
  std::uint64_t bytes_verified = 0;
};

// Returns once every byte is delivered (host sink) or enqueued and its staging buffer's copy has
// completed (device sink); throws the first read or hash error after every worker stopped.
StagedResult run_staged(const std::vector<StagedShard>& shards, const StagedOptions& options);

}  // namespace gpucache::runtime::detail
