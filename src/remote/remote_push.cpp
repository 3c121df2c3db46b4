// push: a finished local dataset into a bucket or onto an HTTP server that accepts PUT. Shards go
// first and manifest.json last, so a reader (which starts from the manifest) never sees a dataset
// whose shards are not all in place; a failed push leaves at most unlisted shard objects, which no
// reader looks at, and pushing again replaces them.
#include <filesystem>

#include "gpucache/error.hpp"
#include "gpucache/remote/remote.hpp"
#include "gpucache/shard/dataset_open.hpp"
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
  std::error_code error;
  if (!fs::is_directory(dataset, error))
    throw Error(dataset, "", "not a dataset folder (push takes the folder gpucache pack wrote)");
  // Listed: every listed shard there with the size the manifest records before anything is sent;
  // an unlisted file is not sent, as no reader would look at it.
  const auto opened = shard::open_dataset(dataset, shard::OpenMode::listed);
  const shard::Manifest& manifest = *opened.manifest;
  const std::string& manifest_path = opened.manifest_path;
  for (const auto& entry : manifest.shards)
    if (entry.bytes > kMaxSinglePut)
      throw Error((fs::path(dataset) / entry.file).string(), "",
                  "larger than 5 GiB, the most one PUT may carry (push does not do multipart "
                  "uploads): pack with a smaller --shard-size");
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
