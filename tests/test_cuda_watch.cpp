// common's watch over calls into CUDA (gpucache/common/cuda_watch.hpp): a call that has not
// returned after the threshold is reported with its description, again later, and once more when it
// returns; a quick one is not; the trace lists every watched call with its result. The runtime's
// calls through CudaApi are watched too (test_runtime_cuda_stream.cpp).
#include <doctest/doctest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpucache/common/cuda_watch.hpp"

using namespace gpucache;

namespace {

// Lines a sink received, safe to read while the watchdog thread adds to them.
struct Lines {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::function<void(std::string_view)> sink() {
    return [this](std::string_view line) {
      std::lock_guard lock(mutex);
      lines.emplace_back(line);
    };
  }
  std::vector<std::string> snapshot() {
    std::lock_guard lock(mutex);
    return lines;
  }
  std::size_t count_containing(const std::string& text) {
    std::size_t count = 0;
    for (const auto& line : snapshot()) count += line.find(text) != std::string::npos;
    return count;
  }
};

// Restores the defaults when a test case ends, passed or not.
struct WatchForTesting {
  WatchForTesting(double seconds, Lines& lines) {
    detail::set_cuda_watch_for_testing(seconds, lines.sink());
  }
  ~WatchForTesting() { detail::set_cuda_watch_for_testing(0, nullptr); }
};

}  // namespace

TEST_CASE("a watched call that does not return is reported, repeatedly, and when it returns") {
  Lines reports;
  WatchForTesting testing(0.05, reports);
  CHECK(cuda_report_after_seconds() == doctest::Approx(0.05));
  { CudaCallWatch quick("quick call"); }
  {
    CudaCallWatch slow("cudaEventSynchronize(%p) of the %s", static_cast<void*>(nullptr),
                       "staging ring");
    // Reported after 0.05 s, then after about 0.1 s and 0.2 s: at least twice in 0.6 s.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (reports.count_containing("has not returned") < 2 &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto lines = reports.snapshot();
  REQUIRE(lines.size() >= 3);
  CHECK(reports.count_containing("quick call") == 0);
  CHECK(reports.count_containing("has not returned") >= 2);
  CHECK(lines.front().find("cudaEventSynchronize((nil)) of the staging ring has not returned") ==
        0);
  // (A report the watchdog had composed as the call returned may come after this line.)
  CHECK(reports.count_containing(
            "cudaEventSynchronize((nil)) of the staging ring returned after") == 1);
}

TEST_CASE("calls in progress on several threads are each reported on their own") {
  Lines reports;
  WatchForTesting testing(0.05, reports);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([t] {
      CudaCallWatch watch("call %d", t);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    });
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 3; ++t) {
    CAPTURE(t);
    CHECK(reports.count_containing("call " + std::to_string(t) + " has not returned") >= 1);
    CHECK(reports.count_containing("call " + std::to_string(t) + " returned after") == 1);
  }
}

TEST_CASE("the trace lists each watched call, its result and its time") {
  Lines trace;
  detail::set_cuda_debug_for_testing(trace.sink());
  CHECK(cuda_debug_enabled());
  CHECK(watched_call("cudaMalloc (a test)", [] { return 2; }) == 2);
  cuda_debug("step %d of %s", 3, "a load");
  detail::set_cuda_debug_for_testing(nullptr);
  const auto lines = trace.snapshot();
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "-> cudaMalloc (a test)");
  CHECK(lines[1].find("<- cudaMalloc (a test) = 2 (") == 0);
  CHECK(lines[2] == "step 3 of a load");
}
