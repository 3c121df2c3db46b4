#include "gpucache/common/cuda_watch.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>
#include <vector>

namespace gpucache {
namespace {

constexpr double kDefaultReportAfter = 60.0;

long thread_id() noexcept {
  return static_cast<long>(::syscall(SYS_gettid));
}

// Writes the whole line with one write(2) per line, so lines of several threads and processes
// appending to one file do not interleave.
void write_all(int fd, const char* text, std::size_t size) noexcept {
  while (size > 0) {
    const ssize_t written = ::write(fd, text, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    text += written;
    size -= static_cast<std::size_t>(written);
  }
}

// "gpucache-cuda 09:12:33.123456 pid=1 tid=2 " + text + "\n".
std::size_t prefixed(char* out, std::size_t capacity, const char* text) noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  tm utc{};
  ::gmtime_r(&now.tv_sec, &utc);
  const int written = std::snprintf(
      out, capacity, "gpucache-cuda %02d:%02d:%02d.%06ld pid=%d tid=%ld %s\n", utc.tm_hour,
      utc.tm_min, utc.tm_sec, now.tv_nsec / 1000, static_cast<int>(::getpid()), thread_id(), text);
  if (written < 0) return 0;
  if (static_cast<std::size_t>(written) >= capacity) {
    out[capacity - 2] = '\n';  // cut, but still one line
    return capacity - 1;
  }
  return static_cast<std::size_t>(written);
}

// $GPUCACHE_DEBUG_CUDA, read once: where trace lines go (-1: nowhere).
struct DebugSink {
  int fd = -1;
  std::function<void(std::string_view)> test_sink;  // set_cuda_debug_for_testing
  std::atomic<bool> testing{false};                 // test_sink is set
  std::mutex mutex;                                 // guards test_sink

  DebugSink() {
    const char* value = std::getenv("GPUCACHE_DEBUG_CUDA");
    if (!value || !*value || std::strcmp(value, "0") == 0) return;
    if (std::strcmp(value, "1") == 0) {
      fd = STDERR_FILENO;
      return;
    }
    fd = ::open(value, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      char line[512];
      std::snprintf(line, sizeof line,
                    "gpucache: GPUCACHE_DEBUG_CUDA=%s cannot be opened (%s); the CUDA trace goes "
                    "to stderr\n",
                    value, std::strerror(errno));
      write_all(STDERR_FILENO, line, std::strlen(line));
      fd = STDERR_FILENO;
    }
  }
};

DebugSink& debug_sink() {
  static DebugSink* sink = new DebugSink;  // never destroyed: calls may come during exit
  return *sink;
}

void emit_debug(const char* text) noexcept {
  DebugSink& sink = debug_sink();
  {
    std::lock_guard lock(sink.mutex);
    if (sink.test_sink) {
      try {
        sink.test_sink(text);
      } catch (...) {
      }
      return;
    }
  }
  if (sink.fd < 0) return;
  char line[400];
  const std::size_t size = prefixed(line, sizeof line, text);
  write_all(sink.fd, line, size);
}

double report_after_from_environment() {
  const char* value = std::getenv("GPUCACHE_CUDA_REPORT_AFTER");
  if (!value || !*value) return kDefaultReportAfter;
  char* end = nullptr;
  const double seconds = std::strtod(value, &end);
  if (end && *end == '\0' && seconds > 0) return seconds;
  char line[300];
  std::snprintf(line, sizeof line,
                "gpucache: GPUCACHE_CUDA_REPORT_AFTER=%s is not a positive number of seconds; "
                "calls into CUDA are reported after %.0f s\n",
                value, kDefaultReportAfter);
  write_all(STDERR_FILENO, line, std::strlen(line));
  return kDefaultReportAfter;
}

}  // namespace

// The watched calls in progress, as a list through the watches themselves (which live on their
// callers' stacks), and the watchdog thread that reports the slow ones.
struct CudaWatchRegistry {
  std::mutex mutex;
  std::condition_variable changed;  // the threshold changed (tests)
  CudaCallWatch* head = nullptr;
  pid_t watchdog_pid = 0;  // the process whose watchdog runs (none in a forked child)
  std::uint64_t generation = 0;
  double report_after = report_after_from_environment();
  std::function<void(std::string_view)> test_sink;

  static CudaWatchRegistry& get() {
    // Never destroyed: watched calls may come from destructors during exit, and the detached
    // watchdog thread reads it until the process ends.
    static CudaWatchRegistry* registry = [] {
      auto* created = new CudaWatchRegistry;
      // A fork while another thread holds the mutex would leave it locked in the child forever.
      ::pthread_atfork([] { get().mutex.lock(); }, [] { get().mutex.unlock(); },
                       [] {
                         CudaWatchRegistry& r = get();
                         r.head = nullptr;  // the calls of the parent's other threads are not ours
                         ++r.generation;
                         r.watchdog_pid = 0;
                         r.mutex.unlock();
                       });
      return created;
    }();
    return *registry;
  }

  // Outside the mutex.
  void report(const std::vector<std::string>& lines) {
    std::function<void(std::string_view)> sink;
    {
      std::lock_guard lock(mutex);
      sink = test_sink;
    }
    for (const std::string& line : lines) {
      if (sink) {
        try {
          sink(line);
        } catch (...) {
        }
      } else {
        const std::string text = "gpucache: " + line + "\n";
        write_all(STDERR_FILENO, text.data(), text.size());
      }
      // Also in the trace, where the one who debugs looks, unless that is stderr already.
      const DebugSink& debug = debug_sink();
      if (debug.testing.load() || (debug.fd >= 0 && debug.fd != STDERR_FILENO))
        emit_debug(line.c_str());
    }
  }

  void watchdog() {
    for (;;) {
      std::vector<std::string> lines;
      {
        std::unique_lock lock(mutex);
        changed.wait_for(
            lock, std::chrono::duration<double>(std::min(1.0, std::max(0.01, report_after / 4))));
        const auto now = std::chrono::steady_clock::now();
        for (CudaCallWatch* watch = head; watch; watch = watch->next_) {
          const double elapsed = std::chrono::duration<double>(now - watch->started_).count();
          if (elapsed < watch->next_report_) continue;
          char text[400];
          std::snprintf(text, sizeof text,
                        "%s has not returned after %.1f s (thread %ld): the GPU or its driver "
                        "does not answer, or is very slow; nvidia-smi and the kernel log (dmesg) "
                        "may say which, GPUCACHE_DEBUG_CUDA=1 traces every CUDA call",
                        watch->text_, elapsed, watch->thread_);
          lines.emplace_back(text);
          watch->reported_ = true;
          watch->next_report_ = elapsed * 2;
        }
      }
      if (!lines.empty()) report(lines);
    }
  }

  // With the mutex held: the watchdog of this process runs.
  void ensure_watchdog() {
    const pid_t pid = ::getpid();
    if (watchdog_pid == pid) return;
    try {
      std::thread([this] { watchdog(); }).detach();
      watchdog_pid = pid;
    } catch (...) {
      // No thread (resource limits): calls are still traced, only not reported.
    }
  }
};

bool cuda_debug_enabled() noexcept {
  const DebugSink& sink = debug_sink();
  return sink.fd >= 0 || sink.testing.load(std::memory_order_relaxed);
}

void cuda_debug(const char* format, ...) noexcept {
  if (!cuda_debug_enabled()) return;
  char text[300];
  va_list arguments;
  va_start(arguments, format);
  std::vsnprintf(text, sizeof text, format, arguments);
  va_end(arguments);
  emit_debug(text);
}

double cuda_report_after_seconds() noexcept {
  CudaWatchRegistry& registry = CudaWatchRegistry::get();
  std::lock_guard lock(registry.mutex);
  return registry.report_after;
}

CudaCallWatch::CudaCallWatch(const char* format, ...) noexcept {
  va_list arguments;
  va_start(arguments, format);
  std::vsnprintf(text_, sizeof text_, format, arguments);
  va_end(arguments);
  thread_ = thread_id();
  if (cuda_debug_enabled()) cuda_debug("-> %s", text_);
  started_ = std::chrono::steady_clock::now();
  CudaWatchRegistry& registry = CudaWatchRegistry::get();
  std::lock_guard lock(registry.mutex);
  registry.ensure_watchdog();
  next_ = registry.head;
  if (next_) next_->prev_ = this;
  registry.head = this;
  generation_ = registry.generation;  // a fork since then emptied the list: nothing to unlink
  next_report_ = registry.report_after;
}

CudaCallWatch::~CudaCallWatch() {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  bool reported;
  {
    CudaWatchRegistry& registry = CudaWatchRegistry::get();
    std::lock_guard lock(registry.mutex);
    if (generation_ == registry.generation) {
      if (prev_)
        prev_->next_ = next_;
      else
        registry.head = next_;
      if (next_) next_->prev_ = prev_;
    }
    reported = reported_;
  }
  if (reported) {
    char text[300];
    std::snprintf(text, sizeof text, "%s returned after %.1f s", text_, seconds);
    CudaWatchRegistry::get().report({text});
  }
  if (cuda_debug_enabled()) cuda_debug("<- %s = %d (%.3f ms)", text_, status_, seconds * 1e3);
}

namespace detail {

void set_cuda_watch_for_testing(double seconds, std::function<void(std::string_view)> sink) {
  CudaWatchRegistry& registry = CudaWatchRegistry::get();
  std::lock_guard lock(registry.mutex);
  registry.report_after = sink ? seconds : report_after_from_environment();
  registry.test_sink = std::move(sink);
  registry.changed.notify_all();
}

void set_cuda_debug_for_testing(std::function<void(std::string_view)> sink) {
  DebugSink& debug = debug_sink();
  std::lock_guard lock(debug.mutex);
  debug.testing = static_cast<bool>(sink);
  debug.test_sink = std::move(sink);
}

}  // namespace detail
}  // namespace gpucache
