// A one-line progress display on stderr (bytes done, rate, ETA) for long pack and verify runs.
// Disabled progress costs one branch per update, so library code reports unconditionally.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace gpucache {

class Progress {
 public:
  // enabled: draw at all (the CLI passes "stderr is a terminal and not --quiet").
  Progress(bool enabled, std::string label, std::uint64_t total_bytes);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Thread-safe; redraws at most ten times a second.
  void advance(std::uint64_t bytes);
  void set_total(std::uint64_t total_bytes);
  // Clears the line.
  void finish();

 private:
  void draw(bool final);
  bool enabled_;
  std::string label_;
  std::atomic<std::uint64_t> total_;
  std::atomic<std::uint64_t> done_{0};
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  std::mutex draw_mutex_;
  bool finished_ = false;
};

// "1.5 GiB": bytes in binary units with `decimals` digits after the point (none for plain bytes).
std::string format_bytes(double bytes, int decimals = 1);

// True when stderr is a terminal: the default for showing progress.
bool stderr_is_terminal() noexcept;

}  // namespace gpucache
