// The files of one remote dataset, fetched and stored with retries: every request goes through
// here, so the retry rule, the counting and the error messages exist once. Requests name files the
// manifest lists (or the manifest itself); there is no listing call.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "aws_config.hpp"
#include "http_session.hpp"
#include "remote_location.hpp"
#include "retry_policy.hpp"

namespace gpucache::remote::detail {

struct ByteSpan {
  std::uint64_t begin = 0, end = 0;  // [begin, end) of an object
};

// Checks a response's bytes; returns why they are wrong, or nothing when they are right. A wrong
// response is tried again like a failed one: bytes damaged in transit differ on the next try.
using BodyCheck = std::function<std::optional<std::string>(std::span<const std::byte>)>;

struct StoreCounters {
  std::atomic<std::uint64_t> requests{0};        // every HTTP request sent, retries included
  std::atomic<std::uint64_t> bytes_received{0};  // body bytes of every response
  std::atomic<std::uint64_t> bytes_sent{0};
  std::atomic<std::uint64_t> retries{0};
};

class ObjectStore {
 public:
  ObjectStore(RemoteLocation location, AwsConfig aws, RetryPolicy policy);

  const RemoteLocation& location() const noexcept { return location_; }
  std::string url_of(std::string_view name) const;

  // GETs `name` (bytes `range` of it when given) and returns the body once `check` accepts it.
  // With `if_none_match` (an ETag) a 304 answer returns std::nullopt: the copy the caller has is
  // current. Throws gpucache::Error naming the URL and byte range: at once for an answer that
  // cannot change (404, 403, 400), after RetryPolicy::attempts tries for throttling, server
  // errors, resets, short or damaged bodies. `etag` receives the response's ETag.
  std::optional<std::vector<std::byte>> get(HttpSession& session, std::string_view name,
                                            std::optional<ByteSpan> range, const BodyCheck& check,
                                            const std::string& if_none_match = {},
                                            std::string* etag = nullptr);
  // PUTs local file `path` (`size` bytes) as `name`, with the same retries.
  void put(HttpSession& session, std::string_view name, const std::string& path,
           std::uint64_t size);

  const StoreCounters& counters() const noexcept { return counters_; }

 private:
  void wait_before(unsigned attempt) const;
  RemoteLocation location_;
  AwsConfig aws_;
  RetryPolicy policy_;
  Signing signing_;
  mutable StoreCounters counters_;
};

}  // namespace gpucache::remote::detail
