// Which answers are tried again, and the backoff between tries (capped, full jitter), and the
// environment variables that tune them; plus the cache size limit's text.
#include <doctest/doctest.h>

#include <map>

#include "cache_size.hpp"
#include "gpucache/error.hpp"
#include "retry_policy.hpp"

using namespace gpucache::remote::detail;
using std::chrono::milliseconds;

namespace {
EnvLookup env_of(std::map<std::string, std::string> values) {
  return [values](const char* name) -> std::optional<std::string> {
    const auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}
}  // namespace

TEST_CASE("throttling, timeouts and server errors are retried; refusals are not") {
  for (const long status : {408L, 429L, 500L, 502L, 503L, 504L, 599L})
    CHECK(retryable_status(status));
  for (const long status : {200L, 206L, 304L, 400L, 401L, 403L, 404L, 416L, 501L, 505L})
    CHECK_FALSE(retryable_status(status));
}

TEST_CASE("backoff grows exponentially to the cap, with full jitter") {
  RetryPolicy policy;
  policy.base = milliseconds(100);
  policy.cap = milliseconds(1000);
  CHECK(policy.delay(0, 0.99) == milliseconds(0));
  CHECK(policy.delay(1, 0.999) == milliseconds(99));
  CHECK(policy.delay(2, 0.5) == milliseconds(100));
  CHECK(policy.delay(3, 0.5) == milliseconds(200));
  CHECK(policy.delay(5, 0.5) == milliseconds(500));   // 1600 capped at 1000
  CHECK(policy.delay(60, 0.5) == milliseconds(500));  // no overflow for large attempts
  CHECK(policy.delay(4, 0.0) == milliseconds(0));     // jitter reaches down to zero
}

TEST_CASE("GPUCACHE_REMOTE_RETRIES and GPUCACHE_REMOTE_BACKOFF_MS take effect or are errors") {
  const RetryPolicy defaults = RetryPolicy::from(env_of({}));
  CHECK(defaults.attempts == 8);
  const RetryPolicy tuned = RetryPolicy::from(
      env_of({{"GPUCACHE_REMOTE_RETRIES", "3"}, {"GPUCACHE_REMOTE_BACKOFF_MS", "5"}}));
  CHECK(tuned.attempts == 3);
  CHECK(tuned.base == milliseconds(5));
  CHECK_THROWS_WITH_AS(RetryPolicy::from(env_of({{"GPUCACHE_REMOTE_RETRIES", "0"}})),
                       doctest::Contains("GPUCACHE_REMOTE_RETRIES"), gpucache::Error);
  CHECK_THROWS_WITH_AS(RetryPolicy::from(env_of({{"GPUCACHE_REMOTE_RETRIES", "3x"}})),
                       doctest::Contains("not a number"), gpucache::Error);
  CHECK_THROWS_WITH_AS(RetryPolicy::from(env_of({{"GPUCACHE_REMOTE_BACKOFF_MS", "-1"}})),
                       doctest::Contains("GPUCACHE_REMOTE_BACKOFF_MS"), gpucache::Error);
}

TEST_CASE("cache size limits: suffixes in powers of 1024, nonsense refused") {
  CHECK(parse_cache_size("100000") == 100000u);
  CHECK(parse_cache_size("512M") == 512ull << 20);
  CHECK(parse_cache_size("20G") == 20ull << 30);
  CHECK(parse_cache_size("20GB") == 20ull << 30);
  CHECK(parse_cache_size("1.5T") == 3ull << 39);
  CHECK(parse_cache_size("4KiB") == 4096u);
  CHECK_FALSE(parse_cache_size(""));
  CHECK_FALSE(parse_cache_size("G"));
  CHECK_FALSE(parse_cache_size("."));
  CHECK_FALSE(parse_cache_size("0"));
  CHECK_FALSE(parse_cache_size("12X"));
  CHECK_FALSE(parse_cache_size("-5G"));
  CHECK_FALSE(parse_cache_size("99999999999T"));
}
