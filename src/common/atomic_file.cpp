#include "gpucache/common/atomic_file.hpp"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "gpucache/error.hpp"

namespace gpucache::detail {
namespace {

std::atomic<std::uint64_t> fsyncs{0};

int counted_fsync(int fd) {
  fsyncs.fetch_add(1, std::memory_order_relaxed);
  return ::fsync(fd);
}

[[noreturn]] void fail_errno(const std::string& path, const std::string& action) {
  const int saved = errno;
  std::string cause = action + ": " + std::strerror(saved);
  if (saved == ENOSPC) cause += " (the disk is full)";
  throw Error(path, "", cause);
}

// The temporaries being written, for remove_temporary_files() to unlink from a signal handler:
// fixed slots of atomic pointers (no allocation, no lock there). A writer that finds no free
// slot (more than kSlots files open at once) is simply not listed; the next pack into its folder
// still removes what it leaves (output_dir.cpp).
constexpr std::size_t kSlots = 256;
std::atomic<const char*> live_temporaries[kSlots];

int register_temporary(const char* path) noexcept {
  for (std::size_t i = 0; i < kSlots; ++i) {
    const char* expected = nullptr;
    if (live_temporaries[i].compare_exchange_strong(expected, path)) return static_cast<int>(i);
  }
  return -1;
}

void unregister_temporary(int slot) noexcept {
  if (slot >= 0) live_temporaries[slot].store(nullptr);
}

}  // namespace

void remove_temporary_files() noexcept {
  for (auto& slot : live_temporaries)
    if (const char* path = slot.load()) ::unlink(path);
}

AtomicFile::AtomicFile(std::string path, Durability durability)
    : path_(std::move(path)), temporary_path_(path_ + ".tmp"), durability_(durability) {
  fd_ = ::open(temporary_path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_errno(path_, "cannot create");
  slot_ = register_temporary(temporary_path_.c_str());
}

AtomicFile::~AtomicFile() {
  unregister_temporary(slot_);
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temporary_path_.c_str());
  }
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  const std::byte* data = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t done = ::write(fd_, data, std::min<std::size_t>(left, 1u << 30));
    if (done < 0) {
      if (errno == EINTR) continue;
      fail_errno(path_, "cannot write");
    }
    data += done;
    left -= static_cast<std::size_t>(done);
  }
  written_ += bytes.size();
}

bool AtomicFile::preallocate(std::uint64_t size) {
  int result = 0;
  do {
    result = ::fallocate(fd_, 0, 0, static_cast<off_t>(size));
  } while (result != 0 && errno == EINTR);
  if (result == 0) return true;
  if (errno == EOPNOTSUPP || errno == ENOSYS) return false;
  fail_errno(path_, "cannot allocate " + std::to_string(size) + " bytes");
}

void AtomicFile::write_at(std::uint64_t offset, std::span<const std::byte> bytes) {
  const std::byte* data = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t done =
        ::pwrite(fd_, data, std::min<std::size_t>(left, 1u << 30), static_cast<off_t>(offset));
    if (done < 0) {
      if (errno == EINTR) continue;
      fail_errno(path_, "cannot write");
    }
    data += done;
    offset += static_cast<std::uint64_t>(done);
    left -= static_cast<std::size_t>(done);
  }
}

void AtomicFile::write_pieces_at(std::uint64_t offset,
                                 std::span<const std::span<const std::byte>> pieces) {
  std::vector<iovec> vectors;
  std::size_t next = 0;  // the first piece not yet handed to pwritev
  std::size_t skip = 0;  // bytes of it already written
  while (next < pieces.size()) {
    vectors.clear();
    std::size_t requested = 0;
    for (std::size_t i = next; i < pieces.size() && vectors.size() < IOV_MAX; ++i) {
      const auto piece = i == next ? pieces[i].subspan(skip) : pieces[i];
      vectors.push_back({const_cast<std::byte*>(piece.data()), piece.size()});
      requested += piece.size();
    }
    const ssize_t done = ::pwritev(fd_, vectors.data(), static_cast<int>(vectors.size()),
                                   static_cast<off_t>(offset));
    if (done < 0) {
      if (errno == EINTR) continue;
      fail_errno(path_, "cannot write");
    }
    if (done == 0 && requested > 0) {
      errno = EIO;
      fail_errno(path_, "cannot write");
    }
    offset += static_cast<std::uint64_t>(done);
    // Past the pieces written whole; a short write leaves the rest of one for the next call.
    for (auto left = static_cast<std::size_t>(done); next < pieces.size();) {
      const std::size_t remaining = pieces[next].size() - skip;
      if (left < remaining) {
        skip += left;
        break;
      }
      left -= remaining;
      skip = 0;
      ++next;
    }
  }
}

void AtomicFile::start_writeback(std::uint64_t offset, std::uint64_t size) noexcept {
  if (durability_ == Durability::unflushed) return;  // nothing waits for the disk
  ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(size),
                    SYNC_FILE_RANGE_WRITE);
}

void AtomicFile::write_zeros(std::size_t count) {
  static const std::vector<std::byte> zeros(1 << 16);
  while (count > 0) {
    const std::size_t piece = std::min(count, zeros.size());
    write({zeros.data(), piece});
    count -= piece;
  }
}

void AtomicFile::commit() {
  if (durability_ == Durability::flushed && counted_fsync(fd_) != 0)
    fail_errno(path_, "cannot sync");
  if (::close(fd_) != 0) {
    fd_ = -1;
    ::unlink(temporary_path_.c_str());
    fail_errno(path_, "cannot close");
  }
  fd_ = -1;
  // Renamed from here on: a signal must not unlink a name that is about to be the final file's.
  unregister_temporary(std::exchange(slot_, -1));
  if (::rename(temporary_path_.c_str(), path_.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temporary_path_.c_str());
    errno = saved;
    fail_errno(path_, "cannot rename into place");
  }
  sync_directory(std::filesystem::path(path_).parent_path().string(), durability_);
}

void write_file_atomic(const std::string& path, std::span<const std::byte> bytes,
                       Durability durability) {
  AtomicFile file(path, durability);
  file.write(bytes);
  file.commit();
}

void write_file_atomic(const std::string& path, const std::string& text, Durability durability) {
  write_file_atomic(path, std::as_bytes(std::span(text.data(), text.size())), durability);
}

void sync_file(const std::string& path, Durability durability) {
  if (durability == Durability::unflushed) return;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno(path, "cannot open to sync");
  if (counted_fsync(fd) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    fail_errno(path, "cannot sync");
  }
  ::close(fd);
}

void sync_directory(const std::string& directory, Durability durability) {
  if (durability == Durability::unflushed) return;
  const int fd =
      ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some file systems refuse to open directories
  counted_fsync(fd);
  ::close(fd);
}

std::uint64_t fsync_count() noexcept {
  return fsyncs.load(std::memory_order_relaxed);
}

}  // namespace gpucache::detail
