// One connection's worth of HTTP: a GET of a byte range or a PUT of a file, signed with AWS
// Signature V4 when the store needs it. Wraps a libcurl easy handle (kept out of every header); a
// session is used by one thread at a time and keeps its connection alive between requests. Retries
// are the caller's (object_store.cpp), so that each try is counted and logged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aws_config.hpp"
#include "retry_policy.hpp"

namespace gpucache::remote::detail {

struct HttpResponse {
  long status = 0;  // 0 when no response arrived
  TransportFailure failure = TransportFailure::none;
  std::string error;  // the transport error's text, when there was one
  std::vector<std::byte> body;
  std::string etag;
  bool overflowed = false;  // the body was longer than max_body (a server that ignored Range)
};

// How to sign: nothing for plain HTTP(S) and public buckets; SigV4 for S3 with credentials.
struct Signing {
  bool sigv4 = false;
  std::string region;
  std::string access_key, secret_key, session_token;
  static Signing for_config(const AwsConfig& aws, bool s3);
};

// Whether this build can send requests (libcurl compiled in).
bool http_built() noexcept;

class HttpSession {
 public:
  HttpSession();  // throws gpucache::Error when libcurl is not built in
  ~HttpSession();
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  // GET `url`, bytes [begin, end) when `range` is given; `if_none_match` (an ETag) makes a
  // server answer 304 without a body when the object has not changed. `max_body` bounds what is
  // kept (a longer body is a transport failure, not memory exhaustion).
  HttpResponse get(const std::string& url, const Signing& signing,
                   std::optional<std::pair<std::uint64_t, std::uint64_t>> range,
                   const std::string& if_none_match, std::uint64_t max_body);
  // PUT the `size` bytes of file `path` from offset 0 to `url`.
  HttpResponse put_file(const std::string& url, const Signing& signing, const std::string& path,
                        std::uint64_t size);

 private:
  void* handle_ = nullptr;  // CURL*
};

}  // namespace gpucache::remote::detail
