// When a request is tried again and how long to wait first. Object stores answer load with 503
// SlowDown (S3) or 429 and expect clients to back off; connections reset and bodies come short. A
// client that retries at once turns throttling into a storm, one that never retries fails a
// training run on a transient error. So: capped exponential backoff with full jitter (AWS's
// recommendation), a bounded number of attempts, and only for what can succeed when tried again.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "remote_env.hpp"

namespace gpucache::remote::detail {

// How a transfer failed below HTTP (what the client library reported), in the terms that decide a
// retry.
enum class TransportFailure {
  none,        // a complete HTTP response arrived
  timeout,     // connect or transfer timed out, or the transfer stalled
  connection,  // refused, reset, closed early (a short body), nothing received
  fatal,       // a malformed URL, TLS certificate or protocol error: trying again cannot help
};

// Whether a response with this HTTP status may succeed when tried again: 408, 429 and 5xx except
// 501 (not implemented) and 505 (HTTP version).
bool retryable_status(long status) noexcept;

struct RetryPolicy {
  unsigned attempts = 8;  // tries per request, the first included
  std::chrono::milliseconds base{200};
  std::chrono::milliseconds cap{20000};
  // GPUCACHE_REMOTE_RETRIES (attempts, 1-100) and GPUCACHE_REMOTE_BACKOFF_MS (base, 0-60000);
  // throws gpucache::Error naming the variable for a value that is not a number in range.
  static RetryPolicy from(const EnvLookup& env);
  // Delay before attempt `attempt` (1 = the first retry): uniform in [0, min(cap, base × 2^(attempt
  // - 1))] ("full jitter"), `unit_random` in [0, 1) choosing where.
  std::chrono::milliseconds delay(unsigned attempt, double unit_random) const noexcept;
};

// Parses a whole decimal number in [min, max]; std::nullopt otherwise.
std::optional<std::uint64_t> parse_count(const std::string& text, std::uint64_t min,
                                         std::uint64_t max) noexcept;

}  // namespace gpucache::remote::detail
