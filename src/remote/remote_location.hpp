// Where a remote dataset lives and the URL of each of its files. `s3://BUCKET/PREFIX` names the
// objects PREFIX/manifest.json, PREFIX/shard-00000.gcs, ...; `http(s)://HOST/PATH` names
// HOST/PATH/manifest.json and so on. Only the files the manifest lists are ever named: nothing
// here lists a bucket.
#pragma once

#include <string>
#include <string_view>

#include "aws_config.hpp"

namespace gpucache::remote::detail {

enum class Scheme { s3, http, https };

struct RemoteLocation {
  Scheme scheme = Scheme::s3;
  std::string url;     // as given, without trailing slashes
  std::string bucket;  // s3 only
  std::string prefix;  // s3: the key prefix without slashes at either end; may be empty
  std::string base;    // http(s): the dataset's URL without a trailing slash
};

// Parses `s3://BUCKET[/PREFIX]`, `http://...` or `https://...`. Throws gpucache::Error naming the
// URL for anything else (an empty or invalid bucket name, a query or fragment, a single shard).
RemoteLocation parse_location(std::string_view url);

// Percent-encodes an object key for a URL path (RFC 3986 unreserved characters and '/' stay).
std::string encode_key(std::string_view key);

// The URL of file `name` (manifest.json, shard-00000.gcs) of the dataset. S3 without an endpoint:
// virtual-hosted style on AWS (https://BUCKET.s3.REGION.amazonaws.com/KEY); with an endpoint
// (AWS_ENDPOINT_URL: MinIO, R2, Ceph, a local server): path style, ENDPOINT/BUCKET/KEY, which every
// S3-compatible store accepts and which needs no DNS name per bucket.
std::string object_url(const RemoteLocation& location, const AwsConfig& aws, std::string_view name);

// A folder name for the dataset in a cache directory: readable ("s3-bucket-prefix", every
// character but letters, digits, '-' and '_' made '-', so never a path of the URL's choosing) and
// unique (ends with 16 hex digits of the URL's hash), so two datasets never share a folder.
std::string cache_folder_name(const RemoteLocation& location);

}  // namespace gpucache::remote::detail
