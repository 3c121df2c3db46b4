#include "remote_location.hpp"

#include <cctype>

#include "gpucache/common/error_text.hpp"
#include "gpucache/common/hash.hpp"
#include "gpucache/error.hpp"

namespace gpucache::remote::detail {
namespace {

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::string_view trim_slashes(std::string_view text) {
  while (!text.empty() && text.front() == '/') text.remove_prefix(1);
  while (!text.empty() && text.back() == '/') text.remove_suffix(1);
  return text;
}

// S3's bucket naming rules (3-63 characters of lowercase letters, digits, '.' and '-', starting and
// ending with a letter or digit), so a typo is refused here rather than as a confusing HTTP error.
bool valid_bucket(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (const char c : bucket)
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-'))
      return false;
  return std::isalnum(static_cast<unsigned char>(bucket.front())) &&
         std::isalnum(static_cast<unsigned char>(bucket.back()));
}

}  // namespace

RemoteLocation parse_location(std::string_view url) {
  const std::string shown = gpucache::detail::escaped(url, 200);
  RemoteLocation location;
  std::string_view rest;
  if (starts_with(url, "s3://")) {
    location.scheme = Scheme::s3;
    rest = url.substr(5);
  } else if (starts_with(url, "https://")) {
    location.scheme = Scheme::https;
    rest = url.substr(8);
  } else if (starts_with(url, "http://")) {
    location.scheme = Scheme::http;
    rest = url.substr(7);
  } else {
    throw Error(shown, "",
                "not a remote dataset URL (expected s3://BUCKET/PREFIX or http(s)://...)");
  }
  if (rest.find_first_of("?#") != std::string_view::npos)
    throw Error(shown, "", "a dataset URL may not carry a query or fragment");
  for (const char c : rest)
    if (static_cast<unsigned char>(c) <= ' ')
      throw Error(shown, "", "a dataset URL may not contain spaces or control characters");
  rest = trim_slashes(rest);
  const std::size_t slash = rest.find('/');
  const std::string_view host = rest.substr(0, slash);
  const std::string_view path =
      slash == std::string_view::npos ? "" : trim_slashes(rest.substr(slash));
  if (host.empty()) throw Error(shown, "", "the URL names no bucket or host");
  if (path.size() >= 4 && path.substr(path.size() - 4) == ".gcs")
    throw Error(shown, "",
                "a remote dataset is a folder holding manifest.json; name the folder, not one "
                "shard");
  if (location.scheme == Scheme::s3) {
    if (!valid_bucket(host))
      throw Error(shown, "",
                  "'" + std::string(host) +
                      "' is not a valid S3 bucket name (3-63 lowercase letters, digits, '.' "
                      "and '-')");
    location.bucket = host;
    location.prefix = path;
    location.url = "s3://";
    location.url.append(location.bucket);
    if (!path.empty()) location.url.append("/").append(location.prefix);
  } else {
    // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) about the chained operator+.
    location.base = location.scheme == Scheme::https ? "https://" : "http://";
    location.base.append(host);
    if (!path.empty()) location.base.append("/").append(path);
    location.url = location.base;
  }
  return location;
}

std::string encode_key(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : key) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
  return out;
}

std::string object_url(const RemoteLocation& location, const AwsConfig& aws,
                       std::string_view name) {
  if (location.scheme != Scheme::s3) return location.base + "/" + encode_key(name);
  const std::string key =
      location.prefix.empty() ? std::string(name) : location.prefix + "/" + std::string(name);
  if (!aws.endpoint.empty()) {
    std::string_view endpoint = aws.endpoint;
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.remove_suffix(1);
    return std::string(endpoint) + "/" + location.bucket + "/" + encode_key(key);
  }
  return "https://" + location.bucket + ".s3." + aws.region + ".amazonaws.com/" + encode_key(key);
}

std::string cache_folder_name(const RemoteLocation& location) {
  std::string readable = location.scheme == Scheme::s3
                             ? "s3-" + location.bucket
                             : location.base.substr(location.base.find("//") + 2);
  if (location.scheme == Scheme::s3 && !location.prefix.empty()) readable += "-" + location.prefix;
  for (char& c : readable)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '-';
  if (readable.size() > 80) readable.resize(80);
  const std::string_view url = location.url;
  return readable + "-" +
         gpucache::detail::hex64(gpucache::detail::xxh3_64(
             {reinterpret_cast<const std::byte*>(url.data()), url.size()}));
}

}  // namespace gpucache::remote::detail
