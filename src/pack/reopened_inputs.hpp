// Descriptors for copying mapped inputs file to file. An input is mapped, not kept open, so its
// path is opened again: and used only when it still names the very file that was mapped.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "gpucache/common/mapped_file.hpp"

namespace gpucache::detail {

class ReopenedInputs {
 public:
  ReopenedInputs() = default;
  ~ReopenedInputs();
  ReopenedInputs(const ReopenedInputs&) = delete;
  ReopenedInputs& operator=(const ReopenedInputs&) = delete;

  // A read-only descriptor of the mapped file `range` lies in, or -1 when the path cannot be
  // opened or now names another file (replaced since it was mapped). Safe to call from threads.
  int descriptor(const MappedFileRange& range);

 private:
  std::mutex mutex_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, int> descriptors_;  // by (device, inode)
};

}  // namespace gpucache::detail
