#include "input_hashes.hpp"

#include "gpucache/common/xxh3.hpp"

#include <algorithm>
#include <chrono>

#include "gpucache/common/mapped_file.hpp"

namespace gpucache::detail {
namespace {

// XXH3-64 of a whole input, streamed in windows whose pages are released once hashed, so a
// file larger than memory is never resident at once. Gives up (the result is then meaningless)
// once `stop` is set.
std::uint64_t hash_file(const std::string& path, std::uint64_t& size,
                        const std::atomic<bool>& stop) {
  constexpr std::uint64_t kWindow = 16ull << 20;
  auto file = MappedFile::open(path);
  file->advise_sequential();
  size = file->size();
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  for (std::uint64_t offset = 0; offset < size && !stop.load(std::memory_order_relaxed);
       offset += kWindow) {
    const std::uint64_t length = std::min(kWindow, size - offset);
    XXH3_64bits_update(state, file->data() + offset, length);
    file->release(offset, length);
  }
  const std::uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

}  // namespace

InputHashes::InputHashes(const std::vector<std::string>& paths, bool background,
                         std::vector<MemoryColumn> memory, std::shared_ptr<const Value> memory_tree)
    : hashing_(
          std::async(background ? std::launch::async : std::launch::deferred,
                     [this, paths, memory = std::move(memory), tree = std::move(memory_tree)] {
                       std::vector<shard::ManifestInput> hashed;
                       for (const auto& path : paths) {
                         shard::ManifestInput input;
                         input.path = path;
                         input.xxh3 = hash_file(path, input.bytes, stop_);
                         hashed.push_back(input);
                       }
                       for (const auto& column : memory) {
                         if (stop_.load(std::memory_order_relaxed)) break;
                         const MemoryProvenance provenance = memory_provenance(column);
                         hashed.push_back({provenance.path, provenance.bytes, provenance.xxh3});
                       }
                       if (tree && !stop_.load(std::memory_order_relaxed)) {
                         const MemoryProvenance provenance = memory_tree_provenance(*tree);
                         hashed.push_back({provenance.path, provenance.bytes, provenance.xxh3});
                       }
                       return hashed;
                     })) {}

InputHashes::~InputHashes() {
  stop_ = true;
  // (A deferred one never ran and must not start now.)
  if (hashing_.valid() &&
      hashing_.wait_for(std::chrono::seconds(0)) != std::future_status::deferred)
    hashing_.wait();
}

}  // namespace gpucache::detail
