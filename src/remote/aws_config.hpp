// Credentials, region and endpoint for S3 requests, from the places every AWS tool reads them:
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_REGION (or
// AWS_DEFAULT_REGION), AWS_ENDPOINT_URL (an S3-compatible store: MinIO, R2, Ceph, a local server),
// then the shared files: AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials and AWS_CONFIG_FILE or
// ~/.aws/config, section AWS_PROFILE (default "default"). Environment variables win over the files.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "remote_env.hpp"

namespace gpucache::remote::detail {

struct AwsConfig {
  std::string access_key;
  std::string secret_key;
  std::string session_token;
  std::string region = "us-east-1";
  std::string endpoint;  // empty: AWS itself
  // Where the keys came from ("environment", "~/.aws/credentials [profile]"), for messages;
  // empty when there are none and requests go unsigned (public buckets).
  std::string credentials_from;
  bool signed_requests() const noexcept { return !access_key.empty(); }
};

// The key = value pairs of section `section` of an INI text as the AWS files write it ("[name]"
// headers, '#' and ';' comments, spaces around '=' ignored, keys lowercased).
std::map<std::string, std::string> ini_section(std::string_view text, std::string_view section);

// Resolves the configuration. Throws gpucache::Error naming the variable or file when it is
// inconsistent (a key id without its secret, AWS_PROFILE naming a profile no file has, an endpoint
// that is not an http(s) URL).
AwsConfig resolve_aws_config(const EnvLookup& env, const FileLookup& files);

}  // namespace gpucache::remote::detail
