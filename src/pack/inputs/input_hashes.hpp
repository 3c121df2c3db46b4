// The inputs' provenance hashes (XXH3-64 of each whole file, for the manifest), taken on a thread
// of their own from the start of a pack, beside parsing, validation and the first shard's fill:
// the plan, which names the inputs by hash, is needed only before the first shard is complete. A
// pack that fails first stops the thread at its next window rather than waiting for whole files
// to be hashed.
#pragma once

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "gpucache/memory_input.hpp"
#include "gpucache/shard/manifest.hpp"

namespace gpucache::detail {

class InputHashes {
 public:
  // Without `background` (one thread allowed) the hashes are taken by get(), on its thread.
  // Columns in memory are hashed as they lie ("memory:NAME"), after the files; an object tree in
  // memory as "memory" (memory_tree_provenance).
  InputHashes(const std::vector<std::string>& paths, bool background,
              std::vector<MemoryColumn> memory = {},
              std::shared_ptr<const Value> memory_tree = nullptr);
  ~InputHashes();
  InputHashes(const InputHashes&) = delete;
  InputHashes& operator=(const InputHashes&) = delete;
  // Path, size and hash of every input, in order. Throws what reading an input threw.
  std::vector<shard::ManifestInput> get() { return hashing_.get(); }

 private:
  std::atomic<bool> stop_{false};
  std::future<std::vector<shard::ManifestInput>> hashing_;
};

}  // namespace gpucache::detail
