// Datasets in object storage and on HTTP(S) servers (docs/remote.md): `s3://BUCKET/PREFIX` and
// `http(s)://HOST/PATH`, wherever a dataset path is accepted. A remote dataset is opened from its
// manifest alone (never a LIST request); the shards a load needs are fetched into a local cache
// folder as range requests of whole chunks, every chunk checked against its hash on arrival, and
// the runtime and the tools then read the cached copies as they read a local dataset. libcurl
// stays inside this module.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpucache::remote {

// True for paths this module handles: s3://, http:// and https://.
bool is_remote_path(std::string_view path) noexcept;
// Whether this build can fetch them (libcurl was found; GPUCACHE_REMOTE).
bool remote_built() noexcept;

struct CacheOptions {
  // Where fetched shards are kept. Empty: GPUCACHE_CACHE, else a temporary folder removed when the
  // dataset is closed (then nothing is reused between runs).
  std::string cache_dir;
  // Least recently used shards are removed once the cache holds more. 0: GPUCACHE_CACHE_LIMIT
  // ("50G"), else no limit.
  std::uint64_t limit_bytes = 0;
};

struct RemoteStats {
  std::uint64_t requests = 0;        // HTTP requests sent, retries included
  std::uint64_t bytes_received = 0;  // response body bytes
  std::uint64_t retries = 0;
  std::uint32_t shards_fetched = 0;  // fetched from the store by this process
  std::uint32_t shards_cached = 0;   // found in the cache, checked, and reused
  std::uint32_t shards_evicted = 0;
};

class RemoteDataset {
 public:
  // Fetches and checks the manifest (its hash; shard names must be shard-NNNNN.gcs) into the
  // cache folder. Throws gpucache::Error naming the URL.
  static std::shared_ptr<RemoteDataset> open(const std::string& url, const CacheOptions& options);
  ~RemoteDataset();
  RemoteDataset(const RemoteDataset&) = delete;
  RemoteDataset& operator=(const RemoteDataset&) = delete;

  const std::string& url() const noexcept;
  // The local folder holding manifest.json and the shards fetched so far.
  const std::string& local_dir() const noexcept;
  std::size_t shard_count() const noexcept;
  const std::string& shard_name(std::size_t index) const;  // shard-00000.gcs
  // Makes shards `indices` (into the manifest's list) present and checked in local_dir(): a cached
  // copy whose size and header match the manifest is reused, anything else is fetched. One
  // process of a node fetches a shard while the others wait for it (a file lock per shard).
  void fetch_shards(const std::vector<std::size_t>& indices);
  void fetch_all();
  RemoteStats stats() const noexcept;

  struct Impl;

 private:
  explicit RemoteDataset(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct PushResult {
  std::uint64_t files = 0;  // shards, then the manifest
  std::uint64_t bytes = 0;
  std::uint64_t requests = 0;
  std::string url;
};

// Puts the local dataset folder `dataset` (a finished pack: manifest.json and the shards it lists)
// at `url`: every shard first, manifest.json last, each a single PUT (S3 takes up to 5 GiB per PUT;
// a larger shard is refused before anything is sent), so a reader never sees a manifest whose
// shards are not all there.
PushResult push(const std::string& dataset, const std::string& url);

}  // namespace gpucache::remote
