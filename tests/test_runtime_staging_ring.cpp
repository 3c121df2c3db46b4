// StagingRing (src/runtime/staging_ring.hpp) against the fake CUDA runtime: pinned buffers reused
// only once the copies out of them completed, fenced even when a task gives its buffer back
// early, plain buffers for CPU destinations, and nothing leaked when allocation fails.
#include <doctest/doctest.h>

#include <deque>
#include <thread>
#include <vector>

#include "cuda_stream.hpp"
#include "fake_cudart/fake_cuda_api.hpp"
#include "staging_ring.hpp"

using namespace gpucache::runtime::detail;
using gpucache::test::fake_cuda;
using gpucache::test::FakeDeviceBuffer;
using gpucache::test::what_of;

namespace {

constexpr std::size_t kBytes = 4096;

void check_clean() {
  const FakeCudaStats stats = fake_cuda_stats();
  CHECK(stats.live_host_allocations == 0);
  CHECK(stats.live_events == 0);
  CHECK(stats.pending_copies == 0);
  CHECK(stats.misuse == 0);
  CHECK(std::string(fake_cuda_last_misuse()) == "");
}

// Fills the leased buffer with `value` and copies it to slot `slot` of `target`.
void stage(const CudaApi& cuda, const CudaStream& stream, StagingRing::Lease& lease,
           const FakeDeviceBuffer& target, std::size_t slot, int value) {
  std::memset(lease.data(), value, kBytes);
  REQUIRE(cuda.memcpy_async(target.data() + slot * kBytes, lease.data(), kBytes,
                            kCudaMemcpyHostToDevice, stream.get()) == 0);
}

}  // namespace

TEST_CASE("pinned buffers are handed out again only after the copies out of them completed") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  fake_cuda_set_copy_delay_us(2000);  // each copy lags far behind the threads refilling buffers
  constexpr std::size_t kSlots = 48;
  FakeDeviceBuffer target(kSlots * kBytes);
  {
    CudaStream stream(cuda, "cuda:0");
    StagingRing ring(&cuda, stream.get(), 2, kBytes);
    CHECK(ring.pinned());
    CHECK(fake_cuda_stats().host_allocs == 2);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < 3; ++t)
      threads.emplace_back([&, t] {
        for (std::size_t slot = t; slot < kSlots; slot += 3) {
          StagingRing::Lease lease = ring.acquire();
          stage(cuda, stream, lease, target, slot, static_cast<int>(slot + 1));
          lease.fence();
        }
      });
    for (auto& thread : threads) thread.join();
  }
  // Without waiting for the events, a refilled buffer would change under its pending copy: the
  // fake would count a misuse and the target would hold another slot's bytes.
  for (std::size_t slot = 0; slot < kSlots; ++slot) {
    CAPTURE(slot);
    CHECK(target.data()[slot * kBytes + kBytes - 1] == std::byte(slot + 1));
  }
  check_clean();
}

TEST_CASE("a lease given back without fence() is fenced, so its pending copy still completes") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  fake_cuda_set_copy_delay_us(20000);
  FakeDeviceBuffer target(2 * kBytes);
  {
    CudaStream stream(cuda, "cuda:0");
    StagingRing ring(&cuda, stream.get(), 1, kBytes);
    {
      StagingRing::Lease lease = ring.acquire();
      stage(cuda, stream, lease, target, 0, 1);
      // A task that throws here (a hash mismatch, say) leaves without fence().
    }
    StagingRing::Lease again = ring.acquire();  // waits for the copy above
    CHECK(fake_cuda_stats().pending_copies == 0);
    stage(cuda, stream, again, target, 1, 2);
    again.fence();
  }
  CHECK(target.data()[kBytes - 1] == std::byte{1});
  CHECK(target.data()[2 * kBytes - 1] == std::byte{2});
  check_clean();
}

TEST_CASE("the fake CUDA runtime reports a buffer reused before its copy completed") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  FakeDeviceBuffer target(kBytes);
  gpucache::test::FakePinnedBuffer buffer(kBytes);
  {
    CudaStream stream(cuda, "cuda:0");
    std::memset(buffer.data(), 1, kBytes);
    fake_cuda_hold_copies(1);
    REQUIRE(cuda.memcpy_async(target.data(), buffer.data(), kBytes, kCudaMemcpyHostToDevice,
                              stream.get()) == 0);
    std::memset(buffer.data(), 2, kBytes);  // what a ring that skips the event wait would do
    fake_cuda_hold_copies(0);
  }
  CHECK(target.data()[0] == std::byte{2});  // the copy delivered the new bytes, as CUDA would
  CHECK(fake_cuda_stats().misuse == 1);
  CHECK(std::string(fake_cuda_last_misuse()).find("changed before the copy ran") !=
        std::string::npos);
  fake_cuda_reset();
}

TEST_CASE("without CUDA the buffers are plain memory, free again as soon as released") {
  fake_cuda();
  fake_cuda_reset();
  StagingRing ring(nullptr, nullptr, 3, 10000);
  CHECK_FALSE(ring.pinned());
  CHECK(ring.count() == 3);
  CHECK(fake_cuda_stats().host_allocs == 0);
  std::deque<StagingRing::Lease> leases;
  for (int i = 0; i < 3; ++i) {
    leases.push_back(ring.acquire());
    CHECK(reinterpret_cast<std::uintptr_t>(leases.back().data()) % 4096 == 0);
    CHECK(leases.back().size() == 10000);
    std::memset(leases.back().data(), i, 10000);
    leases.back().fence();  // nothing to fence: no CUDA
  }
  const std::byte* first = leases.front().data();
  leases.pop_front();
  CHECK(ring.acquire().data() == first);
}

TEST_CASE("a failed allocation frees the buffers made so far and names the staging ring") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  CudaStream stream(cuda, "cuda:0");
  fake_cuda_fail_call("cudaHostAlloc", 2, 2);  // the third buffer
  CHECK(what_of([&] { StagingRing ring(&cuda, stream.get(), 4, kBytes); }) ==
        "staging: cudaHostAlloc of 4096 bytes failed: out of memory (CUDA error 2)");
  CHECK(fake_cuda_stats().host_allocs == 2);
  fake_cuda_fail_call("cudaEventCreateWithFlags", 2, 1);  // the second buffer's event
  CHECK(what_of([&] {
          StagingRing ring(&cuda, stream.get(), 4, kBytes);
        }).find("staging: cudaEventCreateWithFlags failed") == 0);
  cuda.get_last_error();
  check_clean();
}
