// RemoteDataset: the manifest first, then the shards a load asks for, through the cache folder
// (remote_cache.hpp). Every request names a file the manifest lists; nothing lists the bucket.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <thread>

#include "cache_size.hpp"
#include "gpucache/common/atomic_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/remote/remote.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard/shard_layout.hpp"
#include "http_session.hpp"
#include "object_store.hpp"
#include "remote_cache.hpp"
#include "shard_fetch.hpp"

namespace gpucache::remote {

namespace fs = std::filesystem;
using namespace detail;

bool is_remote_path(std::string_view path) noexcept {
  return path.substr(0, 5) == "s3://" || path.substr(0, 7) == "http://" ||
         path.substr(0, 8) == "https://";
}

bool remote_built() noexcept {
  return http_built();
}

struct RemoteDataset::Impl {
  std::string url;
  std::unique_ptr<ObjectStore> store;
  std::string root;        // the cache folder
  bool temporary = false;  // root is ours alone and removed at close
  std::uint64_t limit = 0;
  std::string dir;  // root / cache_folder_name
  std::vector<ShardSource> shards;
  unsigned connections = 8;
  std::atomic<std::uint32_t> fetched{0}, cached{0}, evicted{0};

  std::string shard_path(std::size_t k) const { return (fs::path(dir) / shards[k].name).string(); }
  std::string lock_path(std::size_t k) const {
    return (fs::path(dir) / ".locks" / (shards[k].name + ".lock")).string();
  }
  // Whether the cached file of shard k is the one the manifest lists: its size, and its header's
  // hash (which vouches for the tables, whose hashes vouch for every chunk; a load hashes the
  // chunks it reads, and `gpucache verify` every byte).
  bool cached_copy_ok(std::size_t k) const;
  void ensure(std::size_t k, unsigned connections_for_shard);
};

bool RemoteDataset::Impl::cached_copy_ok(std::size_t k) const {
  const std::string path = shard_path(k);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat info {};
  // decode_header wants room for a footer too (a shorter file cannot be a shard).
  std::byte header[shard::kHeaderSize + shard::kFooterSize];
  const bool read_ok = ::fstat(fd, &info) == 0 &&
                       static_cast<std::uint64_t>(info.st_size) == shards[k].bytes &&
                       ::pread(fd, header, sizeof header, 0) == static_cast<ssize_t>(sizeof header);
  ::close(fd);
  if (!read_ok) return false;
  try {
    return shard::decode_header(header, path).header_hash == shards[k].header_hash;
  } catch (const Error&) {
    return false;
  }
}

void RemoteDataset::Impl::ensure(std::size_t k, unsigned connections_for_shard) {
  const FileLock lock(lock_path(k));  // another rank of the node may be fetching it
  const std::string path = shard_path(k);
  if (cached_copy_ok(k)) {
    // A use: the least recently used shards are evicted first.
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
    ++cached;
    return;
  }
  fetch_shard(*store, shards[k], path, connections_for_shard);
  ++fetched;
}

RemoteDataset::RemoteDataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RemoteDataset::~RemoteDataset() {
  if (impl_ && impl_->temporary) {
    std::error_code error;  // mapped shards stay readable after their files are removed
    fs::remove_all(impl_->root, error);
  }
}

std::shared_ptr<RemoteDataset> RemoteDataset::open(const std::string& url,
                                                   const CacheOptions& options) {
  // First, so that a build without libcurl refuses before anything is created on disk.
  HttpSession session;
  auto impl = std::make_unique<Impl>();
  const EnvLookup env = process_environment();
  RemoteLocation location = parse_location(url);
  const AwsConfig aws =
      location.scheme == Scheme::s3 ? resolve_aws_config(env, real_files()) : AwsConfig{};
  const RetryPolicy policy = RetryPolicy::from(env);
  if (const auto text = env("GPUCACHE_REMOTE_CONNECTIONS")) {
    const auto value = parse_count(*text, 1, 256);
    if (!value)
      throw Error("GPUCACHE_REMOTE_CONNECTIONS", "",
                  "'" + *text + "' is not a number of requests in flight from 1 to 256");
    impl->connections = static_cast<unsigned>(*value);
  }
  impl->url = location.url;
  impl->limit = options.limit_bytes;
  if (impl->limit == 0) {
    if (const auto text = env("GPUCACHE_CACHE_LIMIT")) {
      const auto value = parse_cache_size(*text);
      if (!value)
        throw Error("GPUCACHE_CACHE_LIMIT", "",
                    "'" + *text + "' is not a size (bytes, or a number with K, M, G or T)");
      impl->limit = *value;
    }
  }
  impl->root = !options.cache_dir.empty() ? options.cache_dir : env("GPUCACHE_CACHE").value_or("");
  if (impl->root.empty()) {
    std::string pattern =
        (fs::path(env("TMPDIR").value_or("/tmp")) / "gpucache-remote-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw Error(pattern, "",
                  std::string("cannot create a temporary cache folder: ") + std::strerror(errno) +
                      "; set cache_dir or GPUCACHE_CACHE");
    impl->root = pattern;
    impl->temporary = true;
  }
  impl->dir = (fs::path(impl->root) / cache_folder_name(location)).string();
  std::error_code error;
  fs::create_directories(fs::path(impl->dir) / ".locks", error);
  if (error) throw Error(impl->dir, "", "cannot create the cache folder: " + error.message());
  impl->store = std::make_unique<ObjectStore>(std::move(location), aws, policy);
  // From here the RemoteDataset owns the folder (and removes a temporary one on failure).
  std::shared_ptr<RemoteDataset> dataset(new RemoteDataset(std::move(impl)));
  Impl& self = *dataset->impl_;

  // The manifest, under a lock so the ranks of a node fetch it once: the others then ask with the
  // cached copy's ETag and the store answers 304 without a body.
  const std::string manifest_path = (fs::path(self.dir) / shard::kManifestName).string();
  const std::string etag_path = manifest_path + ".etag";
  const std::string manifest_url = self.store->url_of(shard::kManifestName);
  std::string text;
  {
    const FileLock lock((fs::path(self.dir) / ".locks" / "manifest.json.lock").string());
    std::string cached_etag;
    if (fs::exists(manifest_path, error) && fs::exists(etag_path, error)) {
      std::ifstream etag_file(etag_path);
      std::getline(etag_file, cached_etag);
    }
    std::string etag;
    const auto check = [&](std::span<const std::byte> body) -> std::optional<std::string> {
      bool hash_ok = false;
      try {
        shard::parse_manifest(std::string(reinterpret_cast<const char*>(body.data()), body.size()),
                              manifest_url, hash_ok);
      } catch (const Error& parse_error) {
        return parse_error.cause();
      }
      if (!hash_ok) return std::string("manifest_hash does not match the manifest's content");
      return std::nullopt;
    };
    const auto body =
        self.store->get(session, shard::kManifestName, std::nullopt, check, cached_etag, &etag);
    if (body) {
      text.assign(reinterpret_cast<const char*>(body->data()), body->size());
      gpucache::detail::write_file_atomic(manifest_path, text,
                                          gpucache::detail::Durability::unflushed);
      if (!etag.empty())
        gpucache::detail::write_file_atomic(etag_path, etag + "\n",
                                            gpucache::detail::Durability::unflushed);
      else
        fs::remove(etag_path, error);
    } else {
      std::ifstream file(manifest_path, std::ios::binary);
      text.assign(std::istreambuf_iterator<char>(file), {});
    }
  }
  bool hash_ok = false;
  const shard::Manifest manifest = shard::parse_manifest(text, manifest_url, hash_ok);
  if (!hash_ok)
    throw Error(manifest_path, "manifest_hash",
                "does not match the manifest's content: the cached manifest.json was edited or "
                "corrupted; remove it to fetch it again");
  for (std::size_t k = 0; k < manifest.shards.size(); ++k) {
    const auto& entry = manifest.shards[k];
    // The names become local paths: only shard-NNNNN.gcs, never a path of the server's choosing.
    if (!shard::shard_file_index(entry.file))
      throw Error(manifest_url, "shards[" + std::to_string(k) + "]",
                  "file '" + entry.file + "' is not a shard file name (shard-NNNNN.gcs)");
    self.shards.push_back({entry.file, entry.bytes, entry.header_hash});
  }
  return dataset;
}

const std::string& RemoteDataset::url() const noexcept {
  return impl_->url;
}
const std::string& RemoteDataset::local_dir() const noexcept {
  return impl_->dir;
}
std::size_t RemoteDataset::shard_count() const noexcept {
  return impl_->shards.size();
}
const std::string& RemoteDataset::shard_name(std::size_t index) const {
  return impl_->shards.at(index).name;
}

void RemoteDataset::fetch_shards(const std::vector<std::size_t>& indices) {
  Impl& self = *impl_;
  std::vector<std::size_t> wanted;
  for (const std::size_t k : indices) {
    if (k >= self.shards.size())
      throw Error(self.url, "shard " + std::to_string(k), "not in the manifest");
    if (std::find(wanted.begin(), wanted.end(), k) == wanted.end()) wanted.push_back(k);
  }
  if (wanted.empty()) return;
  // Shards in parallel, chunks of each in parallel: `connections` requests in flight either way.
  const unsigned parallel_shards =
      static_cast<unsigned>(std::min<std::size_t>(self.connections, wanted.size()));
  const unsigned per_shard = std::max(1u, self.connections / parallel_shards);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  const auto work = [&] {
    try {
      for (std::size_t i = next++; i < wanted.size() && !failed; i = next++)
        self.ensure(wanted[i], per_shard);
    } catch (...) {
      failed = true;
      const std::lock_guard lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < parallel_shards; ++t) threads.emplace_back(work);
  work();
  for (auto& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
  if (self.limit > 0) {
    std::set<std::string> keep;
    for (const std::size_t k : wanted) keep.insert(self.shard_path(k));
    self.evicted += trim_cache(self.root, self.limit, keep);
  }
}

void RemoteDataset::fetch_all() {
  std::vector<std::size_t> all(impl_->shards.size());
  for (std::size_t k = 0; k < all.size(); ++k) all[k] = k;
  fetch_shards(all);
}

RemoteStats RemoteDataset::stats() const noexcept {
  const StoreCounters& counters = impl_->store->counters();
  RemoteStats stats;
  stats.requests = counters.requests.load();
  stats.bytes_received = counters.bytes_received.load();
  stats.retries = counters.retries.load();
  stats.shards_fetched = impl_->fetched.load();
  stats.shards_cached = impl_->cached.load();
  stats.shards_evicted = impl_->evicted.load();
  return stats;
}

}  // namespace gpucache::remote
