// A one-line progress display on stderr (bytes done, rate, ETA) for long pack and verify runs,
// and the same figures handed to a callback (the Python API's progress=).
// Disabled progress costs one branch per update, so library code reports unconditionally.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace gpucache {

// Called with (done, total) bytes at most ten times a second from whichever thread reports, one
// call at a time, and once more with done == total when the work finishes.
using ProgressCallback = std::function<void(std::uint64_t done, std::uint64_t total)>;

class Progress {
 public:
  // enabled: draw at all (the CLI passes "stderr is a terminal and not --quiet").
  Progress(bool enabled, std::string label, std::uint64_t total_bytes,
           ProgressCallback callback = {});
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Thread-safe; redraws at most ten times a second.
  void advance(std::uint64_t units);
  void set_total(std::uint64_t total_bytes);
  // Work done in passes that count in units of their own (pack: embedding values checked, then
  // bytes written) is shown as a share of the total: from here on, `units` advanced count as
  // `share` bytes. What the previous stage was given is counted as done.
  void begin_stage(std::uint64_t units, std::uint64_t share);
  // Clears the line (and reports done == total to the callback).
  void finish();

 private:
  std::uint64_t done() const noexcept;
  void draw(bool final);
  bool enabled_;
  std::string label_;
  ProgressCallback callback_;
  std::atomic<std::uint64_t> total_;
  std::atomic<std::uint64_t> done_{0};  // units of the current stage (bytes without stages)
  std::atomic<std::uint64_t> stage_base_{0}, stage_units_{0}, stage_share_{0};
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
