// `gpucache verify`: proves a dataset (or one shard) is intact. Checks structure, every chunk
// hash (multithreaded) and the manifest against the shard set, and reports each problem with the
// file, the column and the byte range involved.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpucache/device.hpp"
#include "gpucache/progress.hpp"

namespace gpucache {

struct VerifyOptions {
  unsigned threads = 0;  // 0: every core
  bool show_progress = false;
  ProgressCallback progress_callback;  // told (done, total) bytes checked, as the line is drawn
  // Also re-check every stored embedding row against the validation rules in the manifest
  // (NaN/Inf, zero rows, norm range, pair cosine, duplicates), on `device`.
  bool deep = false;
  Device device = Device::automatic;
  // A remote dataset (s3://, http(s)://): the cache folder its shards are fetched into and checked
  // in (docs/remote.md). Empty: GPUCACHE_CACHE, else a temporary folder.
  std::string cache_dir;
};

struct Problem {
  std::string file;      // shard or manifest, relative to the dataset directory
  std::string location;  // "header", "column 'embedding' rows 0-99", ...
  std::string cause;
  std::optional<std::uint64_t> byte_begin;  // inclusive byte range in `file`, when known
  std::optional<std::uint64_t> byte_end;
};

struct VerifyReport {
  std::string path;
  std::vector<Problem> problems;
  std::uint64_t shards_checked = 0;
  std::uint64_t chunks_checked = 0;
  std::uint64_t bytes_checked = 0;

  bool ok() const noexcept { return problems.empty(); }
  std::string to_json() const;
  std::string to_text() const;
};

// Never throws for corruption: every finding becomes a Problem. Throws gpucache::Error only when
// `path` cannot be read at all (missing, permission denied).
VerifyReport verify(const std::string& path, const VerifyOptions& options = {});

}  // namespace gpucache
