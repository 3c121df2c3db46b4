#include "retry_policy.hpp"

#include <algorithm>
#include <cctype>

#include "gpucache/error.hpp"

namespace gpucache::remote::detail {

bool retryable_status(long status) noexcept {
  if (status == 408 || status == 429) return true;
  return status >= 500 && status <= 599 && status != 501 && status != 505;
}

std::optional<std::uint64_t> parse_count(const std::string& text, std::uint64_t min,
                                         std::uint64_t max) noexcept {
  if (text.empty() || text.size() > 18) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (value < min || value > max) return std::nullopt;
  return value;
}

RetryPolicy RetryPolicy::from(const EnvLookup& env) {
  RetryPolicy policy;
  if (const auto text = env("GPUCACHE_REMOTE_RETRIES")) {
    const auto value = parse_count(*text, 1, 100);
    if (!value)
      throw Error("GPUCACHE_REMOTE_RETRIES", "",
                  "'" + *text + "' is not a number of attempts from 1 to 100");
    policy.attempts = static_cast<unsigned>(*value);
  }
  if (const auto text = env("GPUCACHE_REMOTE_BACKOFF_MS")) {
    const auto value = parse_count(*text, 0, 60000);
    if (!value)
      throw Error("GPUCACHE_REMOTE_BACKOFF_MS", "",
                  "'" + *text + "' is not a number of milliseconds from 0 to 60000");
    policy.base = std::chrono::milliseconds(*value);
    policy.cap = std::max(policy.cap, policy.base);
  }
  return policy;
}

std::chrono::milliseconds RetryPolicy::delay(unsigned attempt, double unit_random) const noexcept {
  if (attempt == 0) return std::chrono::milliseconds(0);
  // base × 2^(attempt - 1), capped before it can overflow.
  const unsigned shift = std::min(attempt - 1, 30u);
  const auto grown = static_cast<std::uint64_t>(base.count()) << shift;
  const auto ceiling = std::min<std::uint64_t>(grown, static_cast<std::uint64_t>(cap.count()));
  const double fraction = std::clamp(unit_random, 0.0, 1.0);
  return std::chrono::milliseconds(
      static_cast<std::int64_t>(fraction * static_cast<double>(ceiling)));
}

}  // namespace gpucache::remote::detail
