#include "reopened_inputs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpucache::detail {

ReopenedInputs::~ReopenedInputs() {
  for (const auto& [identity, fd] : descriptors_)
    if (fd >= 0) ::close(fd);
}

int ReopenedInputs::descriptor(const MappedFileRange& range) {
  std::lock_guard lock(mutex_);
  const std::pair identity{range.device, range.inode};
  const auto known = descriptors_.find(identity);
  if (known != descriptors_.end()) return known->second;
  int fd = ::open(range.path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat info {};
  if (fd >= 0 &&
      (::fstat(fd, &info) != 0 || static_cast<std::uint64_t>(info.st_dev) != range.device ||
       static_cast<std::uint64_t>(info.st_ino) != range.inode)) {
    ::close(fd);
    fd = -1;
  }
  descriptors_.emplace(identity, fd);  // -1 too: not tried again
  return fd;
}

}  // namespace gpucache::detail
