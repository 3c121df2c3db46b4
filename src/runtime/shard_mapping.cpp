#include "shard_mapping.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gpucache/error.hpp"

namespace gpucache::runtime::detail {

std::shared_ptr<const ShardMapping> ShardMapping::open(const std::string& path, Access access) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path, "", std::string("cannot open: ") + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    const int saved = errno;
    ::close(fd);
    throw Error(path, "",
                S_ISDIR(info.st_mode) ? std::string("is a directory, expected a shard file")
                                      : std::string("cannot stat: ") + std::strerror(saved));
  }
  const auto size = static_cast<std::size_t>(info.st_size);
  std::byte* data = nullptr;
  if (size > 0) {
    const int protection = access == Access::copy_on_write ? PROT_READ | PROT_WRITE : PROT_READ;
    void* mapping = ::mmap(nullptr, size, protection, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      const int saved = errno;
      ::close(fd);
      throw Error(path, "", std::string("cannot map: ") + std::strerror(saved));
    }
    data = static_cast<std::byte*>(mapping);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return std::shared_ptr<const ShardMapping>(
      new ShardMapping(path, data, size, info.st_dev, info.st_ino));
}

ShardMapping::~ShardMapping() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace gpucache::runtime::detail
