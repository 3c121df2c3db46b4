// Page-locked ranges of memory-mapped shards (cudaHostRegister, read-only and portable), so that a
// copy engine reads the mapping in place, without a staging copy. Registrations come in groups (a
// shard's pages under its copies) and only a few groups are registered at a time, so a dataset is
// never pinned whole; a group is unregistered only once the copies out of it have completed, which
// an event recorded after them on the copy stream tells.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "chunk_verify.hpp"
#include "cuda_api.hpp"
#include "cuda_stream.hpp"

namespace gpucache::runtime::detail {

class HostRegistrations {
 public:
  // `stream`: where the copies out of the registered memory are enqueued. `window`: how many fenced
  // groups may stay registered; the group being added and copied is one more.
  HostRegistrations(const CudaApi& cuda, cuda_stream_t stream, std::size_t window);
  // Fences a group that was not, waits for the copies out of every group and unregisters them.
  ~HostRegistrations();
  HostRegistrations(const HostRegistrations&) = delete;
  HostRegistrations& operator=(const HostRegistrations&) = delete;

  // Registers the pages under `ranges` (offsets from `base`, rounded out to whole pages and merged)
  // as one group. Returns false, with nothing of the group left registered and CUDA's error
  // cleared, when CUDA refuses (network file systems, the locked-memory limit): the caller then
  // reads those bytes another way.
  bool add(const std::byte* base, const std::vector<ByteRange>& ranges);
  // Call after the copies out of the newest group are enqueued: records its event, then retires
  // the oldest groups beyond the window, each once its copies have completed.
  void fence();
  // Groups registered now.
  std::size_t groups() const noexcept { return groups_.size(); }

 private:
  struct Group {
    std::vector<void*> pointers;  // one cudaHostRegister each
    CudaEvent event;
    bool fenced = false;
  };
  void unregister(const std::vector<void*>& pointers) noexcept;
  void retire_oldest() noexcept;

  const CudaApi& cuda_;
  cuda_stream_t stream_;
  std::size_t window_;
  std::deque<Group> groups_;
};

}  // namespace gpucache::runtime::detail
