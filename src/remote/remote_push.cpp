// push: a finished local dataset into a bucket or onto an HTTP server that accepts PUT. Shards go
// first and manifest.json last, so a reader (which starts from the manifest) never sees a dataset
// whose shards are not all in place; a failed push leaves at most unlisted shard objects, which no
// reader looks at, and pushing again replaces them.
#include <filesystem>

#include "gpucache/error.hpp"
#include "gpucache/remote/remote.hpp"
#include "gpucache/shard/manifest.hpp"
#include "http_session.hpp"
#include "object_store.hpp"

namespace gpucache::remote {

namespace fs = std::filesystem;
using namespace detail;

namespace {
// S3's limit for one PUT. Larger objects need a multipart upload, which push does not do: pack
// with a smaller --shard-size instead (512M by default).
constexpr std::uint64_t kMaxSinglePut = 5ull << 30;
}  // namespace

PushResult push(const std::string& dataset, const std::string& url) {
  const std::string manifest_path = (fs::path(dataset) / shard::kManifestName).string();
  std::error_code error;
  if (!fs::is_directory(dataset, error))
    throw Error(dataset, "", "not a dataset folder (push takes the folder gpucache pack wrote)");
  if (!fs::exists(manifest_path, error))
    throw Error(dataset, shard::kManifestName, "missing: the dataset is unfinished");
  bool hash_ok = false;
  const shard::Manifest manifest = shard::read_manifest(manifest_path, hash_ok);
  if (!hash_ok)
    throw Error(manifest_path, "manifest_hash",
                "does not match the manifest's content: manifest.json was edited or corrupted; "
                "run gpucache verify");
  // Every listed shard must be there with the size the manifest records before anything is sent.
  for (const auto& entry : manifest.shards) {
    const fs::path path = fs::path(dataset) / entry.file;
    const auto size = fs::file_size(path, error);
    if (error) throw Error(path.string(), "", "missing: listed in manifest.json but not on disk");
    if (size != entry.bytes)
      throw Error(path.string(), "",
                  std::to_string(size) + " bytes, manifest.json lists " +
                      std::to_string(entry.bytes) + ": run gpucache verify");
    if (size > kMaxSinglePut)
      throw Error(path.string(), "",
                  "larger than 5 GiB, the most one PUT may carry (push does not do multipart "
                  "uploads): pack with a smaller --shard-size");
  }
  const EnvLookup env = process_environment();
  RemoteLocation location = parse_location(url);
  const AwsConfig aws =
      location.scheme == Scheme::s3 ? resolve_aws_config(env, real_files()) : AwsConfig{};
  ObjectStore store(std::move(location), aws, RetryPolicy::from(env));
  HttpSession session;
  PushResult result;
  result.url = store.location().url;
  for (const auto& entry : manifest.shards) {
    store.put(session, entry.file, (fs::path(dataset) / entry.file).string(), entry.bytes);
    ++result.files;
    result.bytes += entry.bytes;
  }
  const auto manifest_size = fs::file_size(manifest_path);
  store.put(session, shard::kManifestName, manifest_path, manifest_size);
  ++result.files;
  result.bytes += manifest_size;
  result.requests = store.counters().requests.load();
  return result;
}

}  // namespace gpucache::remote
