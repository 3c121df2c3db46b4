// Entry point for test_gpu_*.cpp: runs the doctest cases only when a CUDA device is usable and
// otherwise exits 77, which CTest reports as "skipped" (SKIP_RETURN_CODE).
// Each case says where it is ("gpu test: start <case>/<subcase>", "gpu test: end ... (<s> s)"),
// and a case (or the device lookup before them, or the teardown after) that runs longer than
// $GPUCACHE_GPU_TEST_WATCHDOG_S seconds (default 60; 0: no watchdog) prints every thread's
// backtrace and ends the process with exit code 3 (tests/hang_watchdog.hpp): a hang on a lent GPU
// machine, whose time is short, is then diagnosed rather than only killed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpucache/device.hpp"
#include "hang_watchdog.hpp"

namespace {
constexpr int watchdog_exit_code = 3;
}

int main(int argc, char** argv) {
  double watchdog_seconds = 0;
  if (!gpucache_testing::hang_watchdog_seconds_from_env("GPUCACHE_GPU_TEST_WATCHDOG_S", 60,
                                                        &watchdog_seconds)) {
    std::fprintf(stderr,
                 "GPUCACHE_GPU_TEST_WATCHDOG_S: '%s' is not a number of seconds; set it to the "
                 "longest a GPU test case may run (0: no watchdog)\n",
                 std::getenv("GPUCACHE_GPU_TEST_WATCHDOG_S"));
    return 2;
  }
  gpucache_testing::start_hang_watchdog("gpu test", watchdog_seconds, watchdog_exit_code);
  // The device lookup loads the CUDA runtime and initialises the driver: it can hang too.
  gpucache_testing::hang_watchdog_enter("looking for a CUDA device (before the test cases)");
  const bool available = gpucache::cuda_available();
  // Why, in resolve_device's words (no runtime, no kernels' module, no device), so a skip on a
  // machine that has a GPU is explained in the test's output (scripts/gpu-check.sh fails on it).
  std::string reason;
  if (!available) gpucache::resolve_device(gpucache::Device::automatic, &reason);
  gpucache_testing::hang_watchdog_leave();
  if (!available) {
    std::printf("%s: skipping GPU tests\n", reason.c_str());
    return 77;
  }
  if (watchdog_seconds > 0) {
    std::printf("gpu test: watchdog %g s per test case (GPUCACHE_GPU_TEST_WATCHDOG_S)\n",
                watchdog_seconds);
  } else {
    std::printf("gpu test: no watchdog (GPUCACHE_GPU_TEST_WATCHDOG_S=0)\n");
  }
  std::fflush(stdout);
  int code = 0;
  {
    doctest::Context context(argc, argv);
    code = context.run();
  }
  std::fflush(stdout);
  // The CUDA runtime's teardown (static destructors, atexit) is timed too.
  gpucache_testing::hang_watchdog_enter("process exit (after the test cases)");
  return code;
}
