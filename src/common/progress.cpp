#include "gpucache/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace gpucache {
std::string format_bytes(double bytes, int decimals) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.*f %s", unit == 0 ? 0 : decimals, bytes, units[unit]);
  return text;
}

bool stderr_is_terminal() noexcept {
  return ::isatty(STDERR_FILENO) == 1;
}

Progress::Progress(bool enabled, std::string label, std::uint64_t total_bytes,
                   ProgressCallback callback)
    : enabled_(enabled),
      label_(std::move(label)),
      callback_(std::move(callback)),
      total_(total_bytes),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  // Only the line is cleared: work that stopped early is not reported as done.
  if (enabled_ && !finished_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
}

void Progress::set_total(std::uint64_t total_bytes) {
  total_ = total_bytes;
}

void Progress::begin_stage(std::uint64_t units, std::uint64_t share) {
  std::lock_guard lock(draw_mutex_);
  stage_base_ = stage_base_ + stage_share_;
  stage_units_ = units;
  stage_share_ = share;
  done_ = 0;
}

std::uint64_t Progress::done() const noexcept {
  const std::uint64_t units = stage_units_.load(), done = done_.load();
  if (units == 0) return stage_base_.load() + done;
  const double fraction = std::min(1.0, static_cast<double>(done) / static_cast<double>(units));
  return stage_base_.load() +
         static_cast<std::uint64_t>(fraction * static_cast<double>(stage_share_.load()));
}

void Progress::advance(std::uint64_t units) {
  done_.fetch_add(units, std::memory_order_relaxed);
  if (!enabled_ && !callback_) return;
  const auto now = std::chrono::steady_clock::now();
  std::unique_lock lock(draw_mutex_, std::try_to_lock);
  if (!lock.owns_lock() || now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(false);
}

void Progress::finish() {
  if (finished_ || (!enabled_ && !callback_)) return;
  std::lock_guard lock(draw_mutex_);
  finished_ = true;
  if (enabled_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  if (callback_) callback_(total_.load(), total_.load());
}

void Progress::draw(bool) {
  if (callback_) callback_(std::min(done(), total_.load()), total_.load());
  if (!enabled_) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double done = static_cast<double>(this->done());
  const double total = static_cast<double>(total_.load());
  const double rate = seconds > 0 ? done / seconds : 0;
  std::string line = "\r\033[K" + label_ + ": " + format_bytes(done);
  if (total > 0) {
    char percent[16];
    std::snprintf(percent, sizeof percent, " (%.0f%%)", 100.0 * done / total);
    line += " of " + format_bytes(total) + percent;
  }
  line += ", " + format_bytes(rate) + "/s";
  if (total > 0 && rate > 0 && done < total) {
    char eta[32];
    std::snprintf(eta, sizeof eta, ", ETA %.0f s", (total - done) / rate);
    line += eta;
  }
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace gpucache
