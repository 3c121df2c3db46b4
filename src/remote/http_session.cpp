// libcurl behind HttpSession. One easy handle per session, reset between requests (the connection
// cache survives a reset, so a session keeps its connection alive). SigV4 is libcurl's own
// (CURLOPT_AWS_SIGV4, 7.75+): it signs the method, path, query, host and the x-amz-* headers;
// the payload is declared UNSIGNED-PAYLOAD, as S3 allows, because every byte is checked against
// the shard's own hashes anyway.
#include <curl/curl.h>
#include <strings.h>

#include <cstdio>
#include <cstring>
#include <mutex>

#include "gpucache/error.hpp"
#include "http_session.hpp"

namespace gpucache::remote::detail {
namespace {

struct Sink {
  std::vector<std::byte>* body;
  std::uint64_t max_body;
  bool overflowed = false;
};

std::size_t write_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const std::size_t bytes = size * count;
  if (sink->body->size() + bytes > sink->max_body) {
    sink->overflowed = true;
    return 0;  // aborts the transfer with CURLE_WRITE_ERROR
  }
  const auto* begin = reinterpret_cast<const std::byte*>(data);
  sink->body->insert(sink->body->end(), begin, begin + bytes);
  return bytes;
}

std::size_t read_header(char* data, std::size_t size, std::size_t count, void* user) {
  const std::size_t bytes = size * count;
  std::string_view line(data, bytes);
  constexpr std::string_view kName = "etag:";
  if (line.size() > kName.size() && strncasecmp(line.data(), kName.data(), kName.size()) == 0) {
    line.remove_prefix(kName.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n' || line.back() == ' '))
      line.remove_suffix(1);
    *static_cast<std::string*>(user) = std::string(line);
  }
  return bytes;
}

std::size_t read_file(char* buffer, std::size_t size, std::size_t count, void* user) {
  return std::fread(buffer, size, count, static_cast<std::FILE*>(user));
}

TransportFailure classify(CURLcode code) {
  switch (code) {
    case CURLE_OK:
      return TransportFailure::none;
    case CURLE_OPERATION_TIMEDOUT:
      return TransportFailure::timeout;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:  // DNS hiccups are transient on clusters
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_WRITE_ERROR:  // a body longer than asked for: the server ignored the range
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return TransportFailure::connection;
    default:
      return TransportFailure::fatal;
  }
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Options every request shares; `headers` must outlive the request.
void common_options(CURL* curl, const std::string& url, const Signing& signing,
                    curl_slist*& headers, std::string& etag, char* error_buffer) {
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 15L);
  // A transfer that moves under 1 KiB/s for 30 s has stalled: give up and let the caller retry.
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 30L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, read_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &etag);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  headers = curl_slist_append(headers, "Expect:");
  if (signing.sigv4) {
    const std::string provider = "aws:amz:" + signing.region + ":s3";
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, provider.c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME, signing.access_key.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, signing.secret_key.c_str());
    headers = curl_slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!signing.session_token.empty())
      headers =
          curl_slist_append(headers, ("x-amz-security-token: " + signing.session_token).c_str());
  }
}

HttpResponse finish(CURL* curl, CURLcode code, const char* error_buffer) {
  HttpResponse response;
  response.failure = classify(code);
  if (code != CURLE_OK)
    response.error = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  response.status = status;
  return response;
}

}  // namespace

Signing Signing::for_config(const AwsConfig& aws, bool s3) {
  Signing signing;
  signing.sigv4 = s3 && aws.signed_requests();
  if (signing.sigv4) {
    signing.region = aws.region;
    signing.access_key = aws.access_key;
    signing.secret_key = aws.secret_key;
    signing.session_token = aws.session_token;
  }
  return signing;
}

bool http_built() noexcept {
  return true;
}

HttpSession::HttpSession() {
  global_init();
  handle_ = curl_easy_init();
  if (handle_ == nullptr) throw Error("", "", "libcurl could not create a connection handle");
}

HttpSession::~HttpSession() {
  curl_easy_cleanup(static_cast<CURL*>(handle_));
}

HttpResponse HttpSession::get(const std::string& url, const Signing& signing,
                              std::optional<std::pair<std::uint64_t, std::uint64_t>> range,
                              const std::string& if_none_match, std::uint64_t max_body) {
  auto* curl = static_cast<CURL*>(handle_);
  curl_easy_reset(curl);
  curl_slist* headers = nullptr;
  std::string etag;
  char error_buffer[CURL_ERROR_SIZE] = {};
  common_options(curl, url, signing, headers, etag, error_buffer);
  std::vector<std::byte> body;
  Sink sink{&body, max_body};
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  if (range) {
    const std::string text =
        "Range: bytes=" + std::to_string(range->first) + "-" + std::to_string(range->second - 1);
    headers = curl_slist_append(headers, text.c_str());
  }
  if (!if_none_match.empty())
    headers = curl_slist_append(headers, ("If-None-Match: " + if_none_match).c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  const CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  HttpResponse response = finish(curl, code, error_buffer);
  if (sink.overflowed) {
    response.overflowed = true;
    response.error = "the response is longer than the bytes asked for";
  }
  response.body = std::move(body);
  response.etag = std::move(etag);
  return response;
}

HttpResponse HttpSession::put_file(const std::string& url, const Signing& signing,
                                   const std::string& path, std::uint64_t size) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) throw Error(path, "", std::string("cannot open: ") + std::strerror(errno));
  auto* curl = static_cast<CURL*>(handle_);
  curl_easy_reset(curl);
  curl_slist* headers = nullptr;
  std::string etag;
  char error_buffer[CURL_ERROR_SIZE] = {};
  common_options(curl, url, signing, headers, etag, error_buffer);
  std::vector<std::byte> body;
  Sink sink{&body, 1 << 20};  // an error document at most
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_file);
  curl_easy_setopt(curl, CURLOPT_READDATA, file);
  curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  const CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  std::fclose(file);
  HttpResponse response = finish(curl, code, error_buffer);
  response.body = std::move(body);
  response.etag = std::move(etag);
  return response;
}

}  // namespace gpucache::remote::detail
