#include "gpucache/detail/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gpucache/error.hpp"

namespace gpucache::detail {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path, "", std::string("cannot open: ") + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int saved = errno;
    ::close(fd);
    throw Error(path, "", std::string("cannot stat: ") + std::strerror(saved));
  }
  if (S_ISDIR(info.st_mode)) {
    ::close(fd);
    throw Error(path, "", "is a directory, expected a file");
  }
  const auto size = static_cast<std::size_t>(info.st_size);
  const std::byte* data = nullptr;
  if (size > 0) {
    void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      const int saved = errno;
      ::close(fd);
      throw Error(path, "", std::string("cannot map: ") + std::strerror(saved));
    }
    data = static_cast<const std::byte*>(mapping);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

void MappedFile::advise_sequential() const noexcept {
  if (data_ != nullptr)
    ::madvise(const_cast<std::byte*>(data_), size_, MADV_SEQUENTIAL | MADV_WILLNEED);
}

}  // namespace gpucache::detail
