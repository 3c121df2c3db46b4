// The GPU tests' hang watchdog (tests/hang_watchdog.hpp) on any machine: a child process (this
// executable again, running a case that is skipped unless named) blocks in a second thread on a
// condition variable nobody signals; its watchdog must end it with its exit code within seconds,
// naming the case and subcase and showing the blocked thread's frames.
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hang_watchdog.hpp"

extern char** environ;

// Extern, not inlined and exported (the executable is linked with -rdynamic): its name must show
// in the blocked thread's backtrace.
extern "C" __attribute__((noinline)) void gpucache_hang_watchdog_test_blocked_worker() {
  static std::mutex mutex;
  static std::condition_variable never_signalled;
  std::unique_lock<std::mutex> lock(mutex);
  never_signalled.wait(lock, [] { return false; });
}

namespace {

constexpr const char* child_case = "hang watchdog child: a worker blocks for ever";
constexpr const char* child_subcase = "waits on a condition variable";
constexpr int child_exit_code = 3;

struct ChildResult {
  int status = -1;
  bool finished = false;
  double seconds = 0;
  std::string output;
};

// Runs this executable with `arguments`, its stdout and stderr into one pipe, for at most
// `limit_seconds` (then it is killed and finished stays false).
ChildResult run_self(const std::vector<std::string>& arguments, double limit_seconds) {
  ChildResult result;
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  // By its own path (not /proc/self/exe), which its backtraces then name for addr2line.
  char self[4096] = {};
  REQUIRE(::readlink("/proc/self/exe", self, sizeof self - 1) > 0);
  std::vector<std::string> argv_text = {self};
  argv_text.insert(argv_text.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& argument : argv_text) argv.push_back(argument.data());
  argv.push_back(nullptr);
  const auto begin = std::chrono::steady_clock::now();
  pid_t child = -1;
  const int spawned = ::posix_spawn(&child, self, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  REQUIRE(spawned == 0);
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  };
  char buffer[4096];
  while (elapsed() < limit_seconds) {
    pollfd entry{pipe_fds[0], POLLIN, 0};
    if (::poll(&entry, 1, 100) <= 0) continue;
    const ssize_t got = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (got <= 0) break;  // EOF: the child and everything holding the pipe ended
    result.output.append(buffer, static_cast<size_t>(got));
  }
  ::close(pipe_fds[0]);
  while (elapsed() < limit_seconds) {
    if (::waitpid(child, &result.status, WNOHANG) == child) {
      result.finished = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!result.finished) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &result.status, 0);
  }
  result.seconds = elapsed();
  return result;
}

}  // namespace

// Runs only when named with --no-skip (the case below does): it hangs for ever but for the
// watchdog.
TEST_CASE("hang watchdog child: a worker blocks for ever" * doctest::skip()) {
  gpucache_testing::start_hang_watchdog("watchdog child", 0.3, child_exit_code);
  SUBCASE("waits on a condition variable") {
    std::thread worker(gpucache_hang_watchdog_test_blocked_worker);
    worker.join();
  }
}

TEST_CASE("the watchdog ends a hung case with its exit code, naming it and every thread's frames") {
  // 0.3 s of watchdog; 60 s is only the bound past which the test calls the watchdog broken.
  const ChildResult child =
      run_self({"--no-skip=true", std::string("--test-case=") + child_case}, 60);
  INFO("child output:\n" << child.output);
  REQUIRE(child.finished);
  REQUIRE(WIFEXITED(child.status));
  CHECK(WEXITSTATUS(child.status) == child_exit_code);
  CHECK(child.seconds < 60);
  const std::string place = std::string(child_case) + "/" + child_subcase;
  // The listener's start line, then the watchdog's report naming the case and subcase.
  CHECK(child.output.find("watchdog child: start " + place) != std::string::npos);
  CHECK(child.output.find("watchdog child: watchdog: test case '" + place +
                          "' still running after") != std::string::npos);
  // The worker's frames, by name, and every thread listed (the main thread joining, the worker,
  // the watchdog itself).
  CHECK(child.output.find("gpucache_hang_watchdog_test_blocked_worker") != std::string::npos);
  CHECK(child.output.find("the 3 threads of process") != std::string::npos);
  CHECK(child.output.find("[the watchdog]") != std::string::npos);
  CHECK(child.output.find("watchdog child: watchdog: exit 3") != std::string::npos);
  // No "end" line: the case never finished.
  CHECK(child.output.find("watchdog child: end " + place) == std::string::npos);
}

TEST_CASE("the watchdog's seconds come from the environment or the default") {
  double seconds = -1;
  ::unsetenv("GPUCACHE_TEST_WATCHDOG_PROBE");
  CHECK(gpucache_testing::hang_watchdog_seconds_from_env("GPUCACHE_TEST_WATCHDOG_PROBE", 60,
                                                         &seconds));
  CHECK(seconds == 60);
  ::setenv("GPUCACHE_TEST_WATCHDOG_PROBE", "2.5", 1);
  CHECK(gpucache_testing::hang_watchdog_seconds_from_env("GPUCACHE_TEST_WATCHDOG_PROBE", 60,
                                                         &seconds));
  CHECK(seconds == 2.5);
  for (const char* bad : {"soon", "-1", "5s", "nan"}) {
    ::setenv("GPUCACHE_TEST_WATCHDOG_PROBE", bad, 1);
    seconds = 7;
    CHECK_FALSE(gpucache_testing::hang_watchdog_seconds_from_env("GPUCACHE_TEST_WATCHDOG_PROBE", 60,
                                                                 &seconds));
    CHECK(seconds == 7);
  }
  ::unsetenv("GPUCACHE_TEST_WATCHDOG_PROBE");
}
