#include "gpucache/common/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

#include "gpucache/error.hpp"

namespace gpucache::detail {
namespace {

// Live mappings (start address -> size), so release_if_mapped_file can tell a file mapping from
// memory the process owns.
std::mutex registry_mutex;
std::map<const std::byte*, std::size_t>& registry() {
  static std::map<const std::byte*, std::size_t> mappings;
  return mappings;
}

// The live mapping holding all of [start, start + length); the registry mutex must be held.
const std::pair<const std::byte* const, std::size_t>* mapping_holding(const std::byte* start,
                                                                      std::size_t length) {
  const auto& mappings = registry();
  auto it = mappings.upper_bound(start);
  if (it == mappings.begin()) return nullptr;
  --it;
  if (length > it->second || start - it->first > static_cast<std::ptrdiff_t>(it->second - length))
    return nullptr;
  return &*it;
}

void drop_pages(const std::byte* begin, std::size_t length, const std::byte* floor,
                const std::byte* ceiling) noexcept {
  static const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  // Whole pages only, rounded inwards would keep partial pages forever; rounded outwards within
  // the mapping is fine: a neighbour's page just faults back in from the page cache.
  auto first = reinterpret_cast<std::uintptr_t>(begin) & ~(page - 1);
  auto last = (reinterpret_cast<std::uintptr_t>(begin) + length + page - 1) & ~(page - 1);
  first = std::max(first, reinterpret_cast<std::uintptr_t>(floor));
  last = std::min(last, reinterpret_cast<std::uintptr_t>(ceiling));
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace

bool release_if_mapped_file(const void* begin, std::size_t length) noexcept {
  const auto* start = static_cast<const std::byte*>(begin);
  std::lock_guard lock(registry_mutex);
  const auto* mapping = mapping_holding(start, length);
  if (mapping == nullptr) return false;
  drop_pages(start, length, mapping->first, mapping->first + mapping->second);
  return true;
}

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
  if (data != nullptr) {
    std::lock_guard lock(registry_mutex);
    registry()[data] = size;
  }
  return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ == nullptr) return;
  {
    std::lock_guard lock(registry_mutex);
    registry().erase(data_);
  }
  ::munmap(const_cast<std::byte*>(data_), size_);
}

void MappedFile::release(std::uint64_t offset, std::uint64_t length) const noexcept {
  if (data_ == nullptr || offset >= size_) return;
  drop_pages(data_ + offset, std::min<std::uint64_t>(length, size_ - offset), data_, data_ + size_);
}

void MappedFile::advise_sequential() const noexcept {
  if (data_ == nullptr) return;
  // Two calls: madvise takes one piece of advice, and SEQUENTIAL | WILLNEED would be WILLNEED.
  ::madvise(const_cast<std::byte*>(data_), size_, MADV_SEQUENTIAL);
  ::madvise(const_cast<std::byte*>(data_), size_, MADV_WILLNEED);
}

}  // namespace gpucache::detail
