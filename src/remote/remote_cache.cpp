#include "remote_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "gpucache/error.hpp"
#include "gpucache/shard/dataset_files.hpp"

namespace gpucache::remote::detail {
namespace fs = std::filesystem;

FileLock::FileLock(const std::string& path) : FileLock(path, false) {
  if (fd_ < 0) throw Error(path, "", std::string("cannot lock: ") + std::strerror(errno));
}

FileLock::FileLock(const std::string& path, bool try_only) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (!try_only)
      throw Error(path, "", std::string("cannot open the lock file: ") + std::strerror(errno));
    return;
  }
  int result;
  do {
    result = ::flock(fd, LOCK_EX | (try_only ? LOCK_NB : 0));
  } while (result != 0 && errno == EINTR);
  if (result != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return;
  }
  fd_ = fd;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

std::uint32_t trim_cache(const std::string& root, std::uint64_t limit,
                         const std::set<std::string>& keep) {
  FileLock evicting((fs::path(root) / ".evict.lock").string());
  struct Entry {
    fs::path path;
    std::uint64_t bytes;
    fs::file_time_type used;
  };
  std::vector<Entry> entries;
  std::uint64_t total = 0;
  std::error_code error;
  for (fs::directory_iterator folder(root, error), end; !error && folder != end;
       folder.increment(error)) {
    if (!folder->is_directory(error)) continue;
    std::error_code inner;
    for (fs::directory_iterator it(folder->path(), inner); !inner && it != end;
         it.increment(inner)) {
      if (!shard::shard_file_index(it->path().filename().string())) continue;
      std::error_code stat_error;
      const auto bytes = it->file_size(stat_error);
      const auto used = it->last_write_time(stat_error);
      if (stat_error) continue;
      total += bytes;
      entries.push_back({it->path(), bytes, used});
    }
  }
  if (total <= limit) return 0;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.used < b.used; });
  std::uint32_t removed = 0;
  for (const Entry& entry : entries) {
    if (total <= limit) break;
    if (keep.count(entry.path.string())) continue;
    const fs::path lock_path =
        entry.path.parent_path() / ".locks" / (entry.path.filename().string() + ".lock");
    const FileLock lock(lock_path.string(), true);
    if (!lock.held()) continue;  // another process is fetching or checking it
    std::error_code remove_error;
    if (fs::remove(entry.path, remove_error)) {
      total -= entry.bytes;
      ++removed;
    }
  }
  return removed;
}

}  // namespace gpucache::remote::detail
