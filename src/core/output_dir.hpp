// The output directory of a pack run: prepared (created, locked against a second writer, an old
// dataset removed only with --force), cleaned up if the run fails, and finished by the manifest.
#pragma once

#include <string>

namespace gpucache::detail {

// Creates the directory, then holds an exclusive lock on it for the whole run, so two packs into
// the same place fail fast instead of interleaving shards. A directory that already holds a
// dataset is refused unless force is set, in which case the old manifest goes first, then its
// shards. Unless release() is called, the destructor removes every shard, temporary and manifest
// file in dir: a failed run leaves no partial dataset.
class OutputCleanup {
 public:
  OutputCleanup(std::string dir, bool force);
  ~OutputCleanup();
  OutputCleanup(const OutputCleanup&) = delete;
  OutputCleanup& operator=(const OutputCleanup&) = delete;
  void release() noexcept { released_ = true; }

 private:
  std::string dir_;
  int lock_fd_ = -1;
  bool released_ = false;
};

// Writes manifest.json atomically: the last step of every pack.
void write_manifest(const std::string& dir, const std::string& text);
// True for the names pack writes: shard-*.gcs, manifest.json and their .tmp files.
bool is_dataset_file(const std::string& name);

}  // namespace gpucache::detail
