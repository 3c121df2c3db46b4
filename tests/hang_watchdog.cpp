#include "hang_watchdog.hpp"

#include <doctest/doctest.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpucache_testing {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point begin) {
  return std::chrono::duration<double>(Clock::now() - begin).count();
}

std::string format_seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", seconds);
  return text;
}

struct State {
  std::mutex mutex;
  std::string prefix;
  double limit = 0;
  int exit_code = 3;
  bool started = false;
  // What runs now (a test case with its subcases, or an activity outside the cases), since when.
  std::string activity;
  bool active = false;
  Clock::time_point since;
  // The listener's place: the case and the subcases entered, each with its start.
  std::string test_case;
  std::vector<std::pair<std::string, Clock::time_point>> subcases;
};

// Never destroyed: the watchdog thread reads it until the process ends, static destructors
// included (a hang in them is one it must report).
State& state() {
  static State* const instance = new State;
  return *instance;
}

// Lines of the listener and the watchdog go out whole and at once, so a process killed later
// (or a pipe read by ctest) still has every line written before.
void print_line(std::ostream& out, const std::string& line) {
  out << line << '\n' << std::flush;
}

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    data += written;
    size -= static_cast<size_t>(written);
  }
}
void write_text(const std::string& text) {
  write_all(STDERR_FILENO, text.data(), text.size());
}

// A /proc file's text, read with plain system calls (no stream: the watchdog must work while
// another thread hangs holding a library lock); empty when unreadable.
std::string read_proc(const std::string& path) {
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(buffer, static_cast<size_t>(got));
    if (text.size() > (1u << 20)) break;
  }
  ::close(fd);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

std::vector<long> thread_ids() {
  std::vector<long> ids;
  const int fd = ::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ids;
  alignas(8) char buffer[8192];
  for (;;) {
    const long got = ::syscall(SYS_getdents64, fd, buffer, sizeof buffer);
    if (got <= 0) break;
    for (long offset = 0; offset < got;) {
      // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
      unsigned short record = 0;
      std::memcpy(&record, buffer + offset + 16, sizeof record);
      const char* name = buffer + offset + 19;
      if (name[0] >= '0' && name[0] <= '9') ids.push_back(std::strtol(name, nullptr, 10));
      offset += record;
    }
  }
  ::close(fd);
  return ids;
}

std::atomic<long> answered_thread{0};

// Runs in the thread that received the signal: its own backtrace, straight to stderr.
// backtrace() was called once before (start_hang_watchdog), so it does not load libgcc_s here.
void print_own_backtrace(int) {
  const int saved_errno = errno;
  void* frames[64];
  const int count = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, count, STDERR_FILENO);
  answered_thread.store(::syscall(SYS_gettid), std::memory_order_release);
  errno = saved_errno;
}

constexpr int backtrace_signal = SIGUSR2;

[[noreturn]] void report_hang(const std::string& activity, double running) {
  State& s = state();
  // What the process printed before goes first (unless a hung thread holds stdout's lock).
  if (::ftrylockfile(stdout) == 0) {
    std::fflush(stdout);
    ::funlockfile(stdout);
  }
  const long own = ::syscall(SYS_gettid);
  const std::vector<long> threads = thread_ids();
  write_text(s.prefix + ": watchdog: " + activity + " still running after " +
             format_seconds(running) + " s (limit " + format_seconds(s.limit) + " s); the " +
             std::to_string(threads.size()) + " threads of process " + std::to_string(::getpid()) +
             " follow, then the process ends with exit code " + std::to_string(s.exit_code) + "\n");
  for (const long thread : threads) {
    const std::string task = "/proc/self/task/" + std::to_string(thread);
    const std::string stat = read_proc(task + "/stat");
    const size_t close = stat.rfind(") ");
    const std::string run_state = close == std::string::npos ? "?" : stat.substr(close + 2, 1);
    write_text("--- thread " + std::to_string(thread) + " (" + read_proc(task + "/comm") +
               "): state " + run_state + ", wchan " + read_proc(task + "/wchan") +
               (thread == own ? " [the watchdog]" : "") + "\n");
    if (thread != own) {
      answered_thread.store(0, std::memory_order_release);
      if (::syscall(SYS_tgkill, ::getpid(), thread, backtrace_signal) != 0) {
        write_text("(could not signal it)\n");
      } else {
        const Clock::time_point asked = Clock::now();
        while (answered_thread.load(std::memory_order_acquire) != thread &&
               seconds_since(asked) < 2.0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        if (answered_thread.load(std::memory_order_acquire) != thread) {
          write_text("(no backtrace within 2 s: the thread is blocked in the kernel or blocks " +
                     std::string(::strsignal(backtrace_signal)) + ")\n");
        }
      }
    }
    const std::string kernel_stack = read_proc(task + "/stack");
    if (!kernel_stack.empty()) write_text("kernel stack:\n" + kernel_stack + "\n");
  }
  // The executable mappings: an unnamed frame "file(+0xOFFSET)" resolves with
  // `addr2line -f -C -e file 0xOFFSET`; a bare address with these start addresses.
  std::string maps = read_proc("/proc/self/maps");
  std::string executable;
  for (size_t begin = 0; begin < maps.size();) {
    size_t end = maps.find('\n', begin);
    if (end == std::string::npos) end = maps.size();
    const std::string line = maps.substr(begin, end - begin);
    if (line.find(" r-xp ") != std::string::npos) executable += "map: " + line + "\n";
    begin = end + 1;
  }
  write_text(s.prefix + ": watchdog: executable mappings:\n" + executable);
  write_text(s.prefix + ": watchdog: exit " + std::to_string(s.exit_code) + "\n");
  // _exit, not exit: static destructors and atexit handlers could wait on what hangs.
  ::_exit(s.exit_code);
}

void watch() {
  State& s = state();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::string activity;
    double running = 0;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      if (!s.active) continue;
      running = seconds_since(s.since);
      if (running <= s.limit) continue;
      activity = s.activity;
    }
    report_hang(activity, running);
  }
}

// The case and its subcases as one name, "case/subcase/subcase". Called with the mutex held.
std::string place(const State& s) {
  std::string name = s.test_case;
  for (const auto& subcase : s.subcases) name += "/" + subcase.first;
  return name;
}

class HangWatchdogListener : public doctest::IReporter {
 public:
  explicit HangWatchdogListener(const doctest::ContextOptions& options)
      : out_(options.cout != nullptr ? *options.cout : std::cout) {}

  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}

  void test_case_start(const doctest::TestCaseData& data) override {
    State& s = state();
    std::string line;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.test_case = data.m_name;
      s.subcases.clear();
      s.activity = "test case '" + s.test_case + "'";
      s.since = Clock::now();
      s.active = true;
      line = s.prefix + ": start " + s.test_case;
    }
    if (printing()) print_line(out_, line);
  }
  // Each pass through a case with subcases enters it again; the watchdog times the case whole.
  void test_case_reenter(const doctest::TestCaseData&) override {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.subcases.clear();
    s.activity = "test case '" + s.test_case + "'";
  }
  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    State& s = state();
    std::string line;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.active = false;
      line = s.prefix + ": end " + s.test_case + " (" + format_seconds(stats.seconds) + " s, " +
             (stats.testCaseSuccess ? "passed" : "failed") + ")";
    }
    if (printing()) print_line(out_, line);
  }
  void test_case_exception(const doctest::TestCaseException& exception) override {
    State& s = state();
    std::string line;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      line = s.prefix + ": " + (exception.is_crash ? "crash" : "exception") + " in " + place(s) +
             ": " + exception.error_string.c_str();
    }
    if (printing()) print_line(out_, line);
  }
  void subcase_start(const doctest::SubcaseSignature& signature) override {
    State& s = state();
    std::string line;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.subcases.emplace_back(signature.m_name.c_str(), Clock::now());
      s.activity = "test case '" + place(s) + "'";
      line = s.prefix + ": start " + place(s);
    }
    if (printing()) print_line(out_, line);
  }
  void subcase_end() override {
    State& s = state();
    std::string line;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      if (s.subcases.empty()) return;
      line = s.prefix + ": end " + place(s) + " (" +
             format_seconds(seconds_since(s.subcases.back().second)) + " s)";
      s.subcases.pop_back();
      s.activity = "test case '" + place(s) + "'";
    }
    if (printing()) print_line(out_, line);
  }
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}

 private:
  static bool printing() {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.started;
  }
  std::ostream& out_;
};

}  // namespace

void start_hang_watchdog(const std::string& prefix, double seconds, int exit_code) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.started) return;
    s.started = true;
    s.prefix = prefix;
    s.limit = seconds;
    s.exit_code = exit_code;
    // Started inside a case: its time counts from now.
    if (s.active) s.since = Clock::now();
  }
  if (seconds <= 0) return;
  // The first backtrace() loads libgcc_s (malloc, dlopen): done here, not in the signal handler.
  void* frames[4];
  ::backtrace(frames, 4);
  struct sigaction action = {};
  action.sa_handler = print_own_backtrace;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(backtrace_signal, &action, nullptr);
  std::thread(watch).detach();
}

void hang_watchdog_enter(const std::string& activity) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.activity = activity;
  s.since = Clock::now();
  s.active = true;
}

void hang_watchdog_leave() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.active = false;
}

bool hang_watchdog_seconds_from_env(const char* variable, double fallback, double* seconds) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') {
    *seconds = fallback;
    return true;
  }
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(value >= 0)) return false;
  *seconds = value;
  return true;
}

}  // namespace gpucache_testing

REGISTER_LISTENER("gpucache_hang_watchdog", 1, gpucache_testing::HangWatchdogListener);
