// `gpucache merge`: one dataset made of several (the parts of a `pack --part` run, or any
// datasets of the same columns and options) without copying shard bytes: shards are hard-linked
// into place under new numbers and one new manifest covers them (docs/scale.md, "Merge").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpucache {

struct MergeOptions {
  std::vector<std::string> parts;  // dataset directories; ordered by part index when packed with
                                   // --part, else as given
  std::string output_dir;          // must not exist yet
  bool copy = false;               // copy shards that cannot be hard-linked (another file system)
  // --no-fsync: do not wait for the disk to hold the copied shards and the manifest (as pack's).
  bool fsync = true;
};

struct MergeResult {
  std::string output_dir;
  std::uint64_t parts = 0;
  std::uint64_t rows = 0;
  std::uint64_t shards = 0;
  std::uint64_t bytes = 0;         // of the shards
  std::uint64_t copied_bytes = 0;  // 0 unless --copy had to copy
  std::string to_text() const;
  std::string to_json() const;
};

MergeResult merge(const MergeOptions& options);

}  // namespace gpucache
