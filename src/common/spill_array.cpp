#include "gpucache/common/spill_array.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpucache/error.hpp"

namespace gpucache::detail {
namespace {

std::size_t page_size() noexcept {
  static const auto size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

std::size_t round_up(std::size_t bytes, std::size_t to) noexcept {
  return (bytes + to - 1) / to * to;
}

[[noreturn]] void fail(const SpillPolicy& policy, const char* what, int error) {
  throw Error(policy.directory, "row bookkeeping file",
              std::string(what) + ": " + std::strerror(error) +
                  " (pack keeps a few bytes per row there; free space or choose another --out)");
}

// An unlinked file in `directory`: O_TMPFILE where the file system has it, else a named file
// removed at once.
int open_unlinked(const SpillPolicy& policy) {
  int fd = ::open(policy.directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string name = policy.directory + "/.gpucache-rows-XXXXXX";
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) fail(policy, "cannot create a file", errno);
  ::unlink(name.c_str());
  return fd;
}

}  // namespace

SpillBuffer::SpillBuffer(const SpillBuffer& other) : policy_(other.policy_) {
  resize(other.size_);
  if (other.size_) std::memcpy(data(), other.data(), other.size_);
}

SpillBuffer& SpillBuffer::operator=(const SpillBuffer& other) {
  if (this != &other) *this = SpillBuffer(other);
  return *this;
}

SpillBuffer::SpillBuffer(SpillBuffer&& other) noexcept
    : policy_(std::move(other.policy_)),
      heap_(std::move(other.heap_)),
      file_(std::exchange(other.file_, false)),
      fd_(std::exchange(other.fd_, -1)),
      mapped_(std::exchange(other.mapped_, nullptr)),
      capacity_(std::exchange(other.capacity_, 0)),
      size_(std::exchange(other.size_, 0)),
      written_(std::exchange(other.written_, 0)) {}

SpillBuffer& SpillBuffer::operator=(SpillBuffer&& other) noexcept {
  if (this == &other) return *this;
  clear();
  policy_ = std::move(other.policy_);
  heap_ = std::move(other.heap_);
  file_ = std::exchange(other.file_, false);
  fd_ = std::exchange(other.fd_, -1);
  mapped_ = std::exchange(other.mapped_, nullptr);
  capacity_ = std::exchange(other.capacity_, 0);
  size_ = std::exchange(other.size_, 0);
  written_ = std::exchange(other.written_, 0);
  return *this;
}

SpillBuffer::~SpillBuffer() {
  clear();
}

void SpillBuffer::clear() noexcept {
  if (mapped_) ::munmap(mapped_, capacity_);
  if (fd_ >= 0) ::close(fd_);
  mapped_ = nullptr;
  fd_ = -1;
  file_ = false;
  capacity_ = 0;
  size_ = 0;
  written_ = 0;
  std::vector<std::byte>().swap(heap_);
}

void SpillBuffer::grow_file(std::size_t capacity) {
  // Blocks are allocated now, so writing through the map cannot hit a full disk later.
  if (const int error = ::posix_fallocate(fd_, static_cast<off_t>(capacity_),
                                          static_cast<off_t>(capacity - capacity_)))
    fail(policy_, "cannot allocate", error);
  void* moved = mapped_ ? ::mremap(mapped_, capacity_, capacity, MREMAP_MAYMOVE)
                        : ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (moved == MAP_FAILED) fail(policy_, "cannot map", errno);
  mapped_ = static_cast<std::byte*>(moved);
  capacity_ = capacity;
}

void SpillBuffer::spill(std::size_t capacity) {
  fd_ = open_unlinked(policy_);
  try {
    grow_file(capacity);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
  if (size_) std::memcpy(mapped_, heap_.data(), size_);
  std::vector<std::byte>().swap(heap_);
  file_ = true;
  written_ = size_;
  release(0, size_);
}

void SpillBuffer::resize(std::size_t bytes) {
  if (!file_) {
    if (policy_.directory.empty() || bytes <= policy_.heap_limit_bytes) {
      heap_.resize(bytes);
      size_ = bytes;
      return;
    }
    spill(round_up(std::max(bytes, 2 * size_), page_size()));
  } else if (bytes > capacity_) {
    grow_file(round_up(std::max(bytes, 2 * capacity_), page_size()));
  }
  // The file's new blocks read as zero; only bytes an earlier, larger size wrote need zeroing
  // (touching the others would make them resident for nothing).
  if (bytes > size_ && written_ > size_)
    std::memset(mapped_ + size_, 0, std::min(bytes, written_) - size_);
  size_ = bytes;
  written_ = std::max(written_, size_);
}

void SpillBuffer::release(std::size_t offset, std::size_t length) noexcept {
  if (!file_ || length == 0 || offset >= capacity_) return;
  const std::size_t page = page_size();
  const std::size_t begin = offset / page * page;
  const std::size_t end = std::min(round_up(offset + length, page), capacity_);
  ::madvise(mapped_ + begin, end - begin, MADV_DONTNEED);
}

}  // namespace gpucache::detail
