// The runtime's CUDA scopes (src/runtime/cuda_stream.hpp) against the fake CUDA runtime: the
// current device restored, streams that wait for their copies before they go, events that order
// streams and tell when copies are done, and CUDA failures as gpucache::Error.
#include <doctest/doctest.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cuda_stream.hpp"
#include "fake_cudart/fake_cuda_api.hpp"
#include "gpucache/common/cuda_watch.hpp"
#include "gpucache/error.hpp"

using namespace gpucache::runtime::detail;
using gpucache::test::fake_cuda;
using gpucache::test::FakeDeviceBuffer;
using gpucache::test::FakePinnedBuffer;
using gpucache::test::what_of;

namespace {

void check_clean() {
  const FakeCudaStats stats = fake_cuda_stats();
  CHECK(stats.live_streams == 0);
  CHECK(stats.live_events == 0);
  CHECK(stats.pending_copies == 0);
  CHECK(stats.misuse == 0);
  CHECK(std::string(fake_cuda_last_misuse()) == "");
}

}  // namespace

TEST_CASE("DeviceScope makes the load's device current and restores the caller's") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  fake_cuda_set_device_count(3);
  REQUIRE(cudaSetDevice(2) == 0);
  int current = -1;
  {
    DeviceScope scope(cuda, 1, "cuda:1");
    cudaGetDevice(&current);
    CHECK(current == 1);
  }
  cudaGetDevice(&current);
  CHECK(current == 2);
  CHECK(what_of([&] { DeviceScope scope(cuda, 7, "cuda:7"); }) ==
        "cuda:7: cudaSetDevice failed: fake CUDA error (CUDA error 101)");
  cudaGetDevice(&current);
  CHECK(current == 2);
  cuda.get_last_error();
}

TEST_CASE("a stream's destructor waits for its copies; synchronize() does too") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  fake_cuda_set_copy_delay_us(20000);
  FakePinnedBuffer source(64);
  FakeDeviceBuffer target(64);
  std::memset(source.data(), 0x5A, 64);
  {
    CudaStream stream(cuda, "cuda:0");
    CHECK(fake_cuda_stats().live_streams == 1);
    fake_cuda_hold_copies(1);
    REQUIRE(cuda.memcpy_async(target.data(), source.data(), 32, kCudaMemcpyHostToDevice,
                              stream.get()) == 0);
    CHECK(fake_cuda_stats().pending_copies == 1);
    fake_cuda_hold_copies(0);
    stream.synchronize();
    CHECK(fake_cuda_stats().pending_copies == 0);
    CHECK(target.data()[31] == std::byte{0x5A});
    REQUIRE(cuda.memcpy_async(target.data() + 32, source.data(), 32, kCudaMemcpyHostToDevice,
                              stream.get()) == 0);
  }
  // Destroyed with a copy pending: it ran before the stream went.
  CHECK(target.data()[63] == std::byte{0x5A});
  check_clean();
}

TEST_CASE("CUDA failures of streams and events are gpucache::Error naming the place and call") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  fake_cuda_fail_call("cudaStreamCreateWithFlags", 2, 0);
  CHECK(what_of([&] { CudaStream stream(cuda, "cuda:0"); }) ==
        "cuda:0: cudaStreamCreateWithFlags failed: out of memory (CUDA error 2)");
  CHECK(fake_cuda_stats().live_streams == 0);
  {
    CudaStream stream(cuda, "cuda:0");
    fake_cuda_fail_call("cudaStreamSynchronize", 1, 0);
    CHECK(what_of([&] { stream.synchronize(); }) ==
          "cuda:0: cudaStreamSynchronize failed: invalid argument (CUDA error 1)");
    CudaEvent event(cuda, "staging");
    fake_cuda_fail_call("cudaEventRecord", 1, 0);
    CHECK(what_of([&] { event.record(stream.get()); }) ==
          "staging: cudaEventRecord failed: invalid argument (CUDA error 1)");
    fake_cuda_fail_call("cudaEventQuery", 2, 0);
    CHECK(what_of([&] { (void)event.completed(); }) ==
          "staging: cudaEventQuery failed: out of memory (CUDA error 2)");
    fake_cuda_fail_call("cudaStreamWaitEvent", 1, 0);
    CHECK(what_of([&] { stream.wait(event); }) ==
          "cuda:0: cudaStreamWaitEvent failed: invalid argument (CUDA error 1)");
  }
  fake_cuda_fail_call("cudaEventCreateWithFlags", 2, 0);
  CHECK(what_of([&] { CudaEvent event(cuda, "copy"); }) ==
        "copy: cudaEventCreateWithFlags failed: out of memory (CUDA error 2)");
  cuda.get_last_error();
  check_clean();
}

TEST_CASE("an event tells when the copies before it completed, without blocking") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  FakePinnedBuffer source(16);
  FakeDeviceBuffer target(16);
  CudaStream stream(cuda, "cuda:0");
  CudaEvent event(cuda, "test");
  CHECK(event.completed());  // never recorded
  event.synchronize();       // returns at once
  fake_cuda_hold_copies(1);
  REQUIRE(cuda.memcpy_async(target.data(), source.data(), 16, kCudaMemcpyHostToDevice,
                            stream.get()) == 0);
  event.record(stream.get());
  CHECK_FALSE(event.completed());
  CHECK(cuda.get_last_error() == kCudaSuccess);  // "not ready" is an answer, not an error
  fake_cuda_hold_copies(0);
  event.synchronize();
  CHECK(event.completed());
  CHECK(fake_cuda_stats().pending_copies == 0);
  // Moving an event hands over the CUDA event, which is destroyed once.
  std::optional<CudaEvent> moved(std::move(event));
  CHECK(moved->get() != nullptr);
  CHECK(event.get() == nullptr);
}

TEST_CASE("a stream that waits on an event runs its work only after the event's copies") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  FakePinnedBuffer source(16);
  FakeDeviceBuffer target(16);
  {
    CudaStream copies(cuda, "cuda:0"), consumer(cuda, "cuda:0");
    CudaEvent copied(cuda, "test"), consumed(cuda, "test");
    fake_cuda_hold_copies(1);
    REQUIRE(cuda.memcpy_async(target.data(), source.data(), 16, kCudaMemcpyHostToDevice,
                              copies.get()) == 0);
    copied.record(copies.get());
    consumer.wait(copied);
    consumed.record(consumer.get());
    CHECK_FALSE(consumed.completed());  // the consumer cannot pass the held copy
    fake_cuda_hold_copies(0);
    consumed.synchronize();
    CHECK(copied.completed());
    CHECK(fake_cuda_stats().pending_copies == 0);

    // Without the wait the consumer's event completes while the copy is still pending.
    CudaEvent unordered(cuda, "test");
    fake_cuda_hold_copies(1);
    REQUIRE(cuda.memcpy_async(target.data(), source.data(), 16, kCudaMemcpyHostToDevice,
                              copies.get()) == 0);
    unordered.record(consumer.get());
    unordered.synchronize();
    CHECK(fake_cuda_stats().pending_copies == 1);
    fake_cuda_hold_copies(0);
  }
  check_clean();
}

TEST_CASE("the fake CUDA runtime reports a stream or event used after it was destroyed") {
  fake_cuda();
  fake_cuda_reset();
  void* stream = nullptr;
  void* event = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, 1) == 0);
  REQUIRE(cudaEventCreateWithFlags(&event, 2) == 0);
  REQUIRE(cudaEventDestroy(event) == 0);
  CHECK(cudaEventRecord(event, stream) == 400);
  CHECK(fake_cuda_stats().misuse == 1);
  CHECK(std::string(fake_cuda_last_misuse()).find("cudaEventRecord on an event that does not") !=
        std::string::npos);
  REQUIRE(cudaStreamDestroy(stream) == 0);
  CHECK(cudaStreamDestroy(stream) == 400);
  CHECK(fake_cuda_stats().misuse == 2);
  fake_cuda_reset();
}

TEST_CASE("a CUDA call that blocks is reported naming the call; the trace lists every call") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  std::mutex mutex;
  std::vector<std::string> reports, trace;
  const auto has = [&](const std::vector<std::string>& lines, const std::string& text) {
    std::lock_guard lock(mutex);
    for (const auto& line : lines)
      if (line.find(text) != std::string::npos) return true;
    return false;
  };
  gpucache::detail::set_cuda_watch_for_testing(0.05, [&](std::string_view line) {
    std::lock_guard lock(mutex);
    reports.emplace_back(line);
  });
  gpucache::detail::set_cuda_debug_for_testing([&](std::string_view line) {
    std::lock_guard lock(mutex);
    trace.emplace_back(line);
  });
  FakePinnedBuffer source(16);
  FakeDeviceBuffer target(16);
  {
    CudaStream stream(cuda, "cuda:0");
    CudaEvent event(cuda, "staging");
    // A copy that does not run (a GPU that does not answer) and a wait for it.
    fake_cuda_hold_copies(1);
    REQUIRE(cuda.memcpy_async(target.data(), source.data(), 16, kCudaMemcpyHostToDevice,
                              stream.get()) == 0);
    event.record(stream.get());
    std::thread waiter([&] { event.synchronize(); });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!has(reports, "has not returned") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    fake_cuda_hold_copies(0);
    waiter.join();
  }
  gpucache::detail::set_cuda_watch_for_testing(0, nullptr);
  gpucache::detail::set_cuda_debug_for_testing(nullptr);
  CHECK(has(reports, "cudaEventSynchronize(0x"));
  CHECK(has(reports, "has not returned after"));
  CHECK(has(reports, "returned after"));
  // Only the wait blocked: the calls before it returned at once.
  CHECK_FALSE(has(reports, "cudaMemcpyAsync"));
  for (const char* call : {"-> cudaStreamCreateWithFlags(", "<- cudaStreamCreateWithFlags(",
                           "-> cudaMemcpyAsync(", "-> cudaEventRecord(", "-> cudaEventSynchronize(",
                           "-> cudaStreamSynchronize(", "-> cudaStreamDestroy("}) {
    CAPTURE(call);
    CHECK(has(trace, call));
  }
  check_clean();
}
