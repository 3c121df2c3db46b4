// The cache folder of remote datasets: per-shard file locks, so the ranks of a node fetch each
// shard once (one fetches while the others wait, then reuse its file), and the size limit (least
// recently used shards go first; a use touches the file's mtime).
//
//   CACHE/                     GPUCACHE_CACHE or cache_dir=
//     .evict.lock              held while the cache is trimmed
//     s3-bucket-prefix-HASH/   one folder per dataset URL (cache_folder_name)
//       manifest.json          the manifest as fetched (its hash checked), and manifest.etag
//       shard-00000.gcs        whole shards, fetched and checked (shard_fetch.hpp)
//       .locks/shard-00000.gcs.lock
#pragma once

#include <cstdint>
#include <set>
#include <string>

namespace gpucache::remote::detail {

// An exclusive flock on a lock file, created when missing; released when destroyed.
class FileLock {
 public:
  // Blocks until the lock is held. Throws gpucache::Error naming the file when it cannot.
  explicit FileLock(const std::string& path);
  // Does not block: held() says whether it was taken.
  FileLock(const std::string& path, bool try_only);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool held() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Removes least recently used shard files (by mtime) of every dataset folder under `root` until
// their total is at most `limit` bytes, skipping the files in `keep` (what the current load is
// about to read) and shards whose lock another process holds. Returns how many were removed.
std::uint32_t trim_cache(const std::string& root, std::uint64_t limit,
                         const std::set<std::string>& keep);

}  // namespace gpucache::remote::detail
