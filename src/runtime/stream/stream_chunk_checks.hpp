// The batch stream's hash checks: every chunk a batch reads is hashed once per epoch (per
// "generation", which the stream advances at each epoch and seek) before the batch is handed out.
// Reader threads that need the same chunk wait for the one hashing it.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "dataset_state.hpp"

namespace gpucache::runtime::detail {

class ChunkChecks {
 public:
  // Shards not yet mapped (layout null: a remote stream opens them as it goes) are added later.
  explicit ChunkChecks(const std::vector<MappedShard>& shards);
  // Makes room for shard `shard` once it is mapped, before any reader asks for its chunks.
  void add(std::size_t shard);
  // Hashes the chunks of shard `shard` (an index into `shards`) under file bytes [begin, end) not
  // yet hashed in `generation`; throws the chunk's hash error.
  void ensure(std::size_t shard, std::uint64_t begin, std::uint64_t end, std::uint64_t generation);
  std::uint64_t bytes_verified() const noexcept { return bytes_.load(); }

 private:
  const std::vector<MappedShard>& shards_;
  // Per shard, per chunk: the generation it was last hashed in (0: never).
  std::vector<std::unique_ptr<std::atomic<std::uint64_t>[]>> stamps_;
  std::array<std::mutex, 64> locks_;
  std::atomic<std::uint64_t> bytes_{0};
};

}  // namespace gpucache::runtime::detail
