#include "object_store.hpp"

#include <random>
#include <thread>

#include "gpucache/common/error_text.hpp"
#include "gpucache/error.hpp"

namespace gpucache::remote::detail {
namespace {

std::string describe_range(std::optional<ByteSpan> range) {
  if (!range) return "";
  return "bytes " + std::to_string(range->begin) + "-" + std::to_string(range->end - 1);
}

// What a store said about a refused request, in one line: S3 puts a <Code> and <Message> in an XML
// body; other servers put text. At most 200 characters of it.
std::string server_said(const std::vector<std::byte>& body) {
  std::string text(reinterpret_cast<const char*>(body.data()),
                   std::min<std::size_t>(body.size(), 2000));
  const auto tag = [&](const char* name) -> std::string {
    const std::string open = std::string("<") + name + ">", close = std::string("</") + name + ">";
    const auto begin = text.find(open), end = text.find(close);
    if (begin == std::string::npos || end == std::string::npos || end < begin) return "";
    return text.substr(begin + open.size(), end - begin - open.size());
  };
  std::string said = tag("Code");
  if (const std::string message = tag("Message"); !message.empty())
    said += (said.empty() ? "" : ": ") + message;
  if (said.empty()) said = text;
  said = gpucache::detail::one_line(said, 200);
  return said.empty() ? "" : " (" + said + ")";
}

std::string refusal(long status, const AwsConfig& aws, bool s3) {
  switch (status) {
    case 404:
      return "not found (HTTP 404): check the URL; a dataset folder must hold manifest.json and "
             "the shards it lists";
    case 403:
    case 401:
      if (!s3) return "access denied (HTTP " + std::to_string(status) + ")";
      return "access denied (HTTP " + std::to_string(status) + ") with " +
             (aws.signed_requests() ? "credentials from " + aws.credentials_from
                                    : std::string("no credentials (unsigned request): set "
                                                  "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                                                  "or AWS_PROFILE")) +
             ", region " + aws.region;
    default:
      return "the server refused the request (HTTP " + std::to_string(status) + ")";
  }
}

double unit_random() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

}  // namespace

ObjectStore::ObjectStore(RemoteLocation location, AwsConfig aws, RetryPolicy policy)
    : location_(std::move(location)),
      aws_(std::move(aws)),
      policy_(policy),
      signing_(Signing::for_config(aws_, location_.scheme == Scheme::s3)) {}

std::string ObjectStore::url_of(std::string_view name) const {
  return object_url(location_, aws_, name);
}

void ObjectStore::wait_before(unsigned attempt) const {
  counters_.retries.fetch_add(1, std::memory_order_relaxed);
  std::this_thread::sleep_for(policy_.delay(attempt, unit_random()));
}

std::optional<std::vector<std::byte>> ObjectStore::get(HttpSession& session, std::string_view name,
                                                       std::optional<ByteSpan> range,
                                                       const BodyCheck& check,
                                                       const std::string& if_none_match,
                                                       std::string* etag) {
  const std::string url = url_of(name);
  const bool s3 = location_.scheme == Scheme::s3;
  // A manifest of 100,000 shards is ~15 MB; nothing gpucache fetches whole is near 1 GiB.
  const std::uint64_t max_body = range ? range->end - range->begin : (1ull << 30);
  std::string last;
  for (unsigned attempt = 0; attempt < policy_.attempts; ++attempt) {
    if (attempt > 0) wait_before(attempt);
    counters_.requests.fetch_add(1, std::memory_order_relaxed);
    HttpResponse response = session.get(
        url, signing_, range ? std::optional(std::pair(range->begin, range->end)) : std::nullopt,
        if_none_match, max_body);
    counters_.bytes_received.fetch_add(response.body.size(), std::memory_order_relaxed);
    if (response.failure == TransportFailure::fatal)
      throw Error(url, describe_range(range), "request failed: " + response.error);
    if (response.overflowed && range && response.status == 200)
      throw Error(url, describe_range(range),
                  "the server ignored the Range header (HTTP 200 with the whole object); "
                  "gpucache needs a server that answers range requests (HTTP 206)");
    if (response.failure != TransportFailure::none) {
      last =
          (response.failure == TransportFailure::timeout ? "timed out: " : "connection failed: ") +
          response.error;
      continue;
    }
    if (response.status == 304 && !if_none_match.empty()) return std::nullopt;
    if (retryable_status(response.status)) {
      last = "HTTP " + std::to_string(response.status) + server_said(response.body);
      continue;
    }
    const bool ok =
        range ? (response.status == 206 || (response.status == 200 && range->begin == 0 &&
                                            response.body.size() == range->end - range->begin))
              : response.status == 200;
    if (!ok) {
      if (response.status == 200 && range)
        throw Error(url, describe_range(range),
                    "the server ignored the Range header (HTTP 200 with the whole object); "
                    "gpucache needs a server that answers range requests (HTTP 206)");
      throw Error(url, describe_range(range),
                  refusal(response.status, aws_, s3) + server_said(response.body));
    }
    if (range && response.body.size() != range->end - range->begin) {
      last = "short body: " + std::to_string(response.body.size()) + " of " +
             std::to_string(range->end - range->begin) + " bytes";
      continue;
    }
    if (check) {
      if (auto cause = check(response.body)) {
        last = *cause;
        continue;
      }
    }
    if (etag) *etag = response.etag;
    return std::move(response.body);
  }
  throw Error(url, describe_range(range),
              last + " (after " + std::to_string(policy_.attempts) +
                  " attempts; GPUCACHE_REMOTE_RETRIES sets how many); nothing of it was used");
}

void ObjectStore::put(HttpSession& session, std::string_view name, const std::string& path,
                      std::uint64_t size) {
  const std::string url = url_of(name);
  std::string last;
  for (unsigned attempt = 0; attempt < policy_.attempts; ++attempt) {
    if (attempt > 0) wait_before(attempt);
    counters_.requests.fetch_add(1, std::memory_order_relaxed);
    const HttpResponse response = session.put_file(url, signing_, path, size);
    if (response.failure == TransportFailure::fatal)
      throw Error(url, "", "upload failed: " + response.error);
    if (response.failure != TransportFailure::none) {
      last = "connection failed: " + response.error;
      continue;
    }
    if (retryable_status(response.status)) {
      last = "HTTP " + std::to_string(response.status) + server_said(response.body);
      continue;
    }
    if (response.status < 200 || response.status > 299)
      throw Error(url, "",
                  refusal(response.status, aws_, location_.scheme == Scheme::s3) +
                      server_said(response.body));
    counters_.bytes_sent.fetch_add(size, std::memory_order_relaxed);
    return;
  }
  throw Error(url, "",
              "upload " + last + " (after " + std::to_string(policy_.attempts) + " attempts)");
}

}  // namespace gpucache::remote::detail
