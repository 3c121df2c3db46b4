// The output directory of a pack run. It is created and locked against a second writer, an old
// dataset is removed only with --force, and a run that fails leaves no partial dataset behind.
// A run killed outright (SIGKILL, power loss) leaves complete shards and pack-state.json but no
// manifest: verify reports it as incomplete, and `pack --resume` finishes it.
#pragma once

#include <optional>
#include <string>

#include "gpucache/common/atomic_file.hpp"
#include "gpucache/common/spill_array.hpp"

namespace gpucache::detail {

// The nearest existing directory at or above `dir` (made absolute): the file system the output
// will be on, before it is created.
std::string nearest_existing_directory(const std::string& dir);

// Where pack keeps its per-row bookkeeping once it outgrows the heap (64 MiB an array, or
// $GPUCACHE_ROW_HEAP_LIMIT bytes): unlinked files on the output's file system, in the nearest
// existing ancestor of output_dir, so the bound on memory holds whatever the row count.
SpillPolicy row_spill_policy(const std::string& output_dir);

enum class OutputMode { fresh, replace, resume };

class OutputDir {
 public:
  // fresh: refuse a directory holding dataset files; replace: remove them first (manifest
  // first, so an interrupted replacement never looks finished); resume: keep them.
  OutputDir(std::string dir, OutputMode mode, Durability durability = Durability::flushed);
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  const std::string& path() const noexcept { return dir_; }
  std::string file(const std::string& name) const;
  // The plan of the run (inputs, options, shard boundaries). A fresh run writes it before any
  // shard; a resumed run requires the stored one to be identical, so reused shards are known to
  // be the ones this run would write.
  void record_plan(const std::string& plan_text);
  // Writes the manifest (the last step) and removes pack-state.json: the dataset is finished.
  void finish(const std::string& manifest_text);

 private:
  std::string dir_;
  OutputMode mode_;
  Durability durability_;
  int lock_fd_ = -1;
  bool finished_ = false;
};

}  // namespace gpucache::detail
