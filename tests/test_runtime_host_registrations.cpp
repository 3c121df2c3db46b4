// HostRegistrations (src/runtime/host_registrations.hpp) against the fake CUDA runtime: ranges
// rounded out to pages and merged, a bounded number of groups registered at once, each
// unregistered only after the copies out of it completed, and a refusal that leaves nothing behind.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_stream.hpp"
#include "fake_cudart/fake_cuda_api.hpp"
#include "host_registrations.hpp"

using namespace gpucache::runtime::detail;
using gpucache::test::fake_cuda;
using gpucache::test::FakeDeviceBuffer;

namespace {

const std::size_t kPage = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));

// Read-only pages standing in for a shard's mapping, with a recognisable byte on each.
class Mapping {
 public:
  explicit Mapping(std::size_t pages) : size_(pages * kPage) {
    void* memory =
        ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(memory != MAP_FAILED);
    data_ = static_cast<std::byte*>(memory);
    for (std::size_t page = 0; page < pages; ++page)
      std::memset(data_ + page * kPage, static_cast<int>(page + 1), kPage);
    REQUIRE(::mprotect(data_, size_, PROT_READ) == 0);
  }
  ~Mapping() { ::munmap(data_, size_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  const std::byte* data() const { return data_; }

 private:
  std::size_t size_;
  std::byte* data_;
};

void check_clean() {
  const FakeCudaStats stats = fake_cuda_stats();
  CHECK(stats.live_registrations == 0);
  CHECK(stats.pending_copies == 0);
  CHECK(stats.live_events == 0);
  CHECK(stats.misuse == 0);
  CHECK(std::string(fake_cuda_last_misuse()) == "");
}

}  // namespace

TEST_CASE("a group registers its ranges rounded out to pages, overlapping ones merged") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  Mapping mapping(8);
  CudaStream stream(cuda, "cuda:0");
  {
    HostRegistrations registrations(cuda, stream.get(), 2);
    // [10, 100) and [kPage + 5, kPage + 6) share pages 0-1; [5 pages + 1, 6 pages) is apart; the
    // empty range registers nothing.
    REQUIRE(registrations.add(
        mapping.data(),
        {{10, 100}, {kPage + 5, kPage + 6}, {3 * kPage, 3 * kPage}, {5 * kPage + 1, 6 * kPage}}));
    CHECK(registrations.groups() == 1);
    CHECK(fake_cuda_stats().registers == 2);
    CHECK(fake_cuda_stats().live_registrations == 2);
    registrations.fence();
  }
  check_clean();
}

TEST_CASE("at most `window` fenced groups stay registered; the oldest go once copied") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  fake_cuda_set_copy_delay_us(5000);
  Mapping mapping(6);
  FakeDeviceBuffer target(6 * kPage);
  CudaStream stream(cuda, "cuda:0");
  {
    HostRegistrations registrations(cuda, stream.get(), 2);
    for (std::size_t page = 0; page < 6; ++page) {
      const std::uint64_t begin = page * kPage;
      REQUIRE(registrations.add(mapping.data(), {{begin, begin + kPage}}));
      REQUIRE(cuda.memcpy_async(target.data() + begin, mapping.data() + begin, kPage,
                                kCudaMemcpyHostToDevice, stream.get()) == 0);
      registrations.fence();
      CHECK(registrations.groups() <= 2);
      CHECK(fake_cuda_stats().live_registrations <= 2);
    }
    // The group being added comes on top of the window: one copying while the next is pinned.
    CHECK(fake_cuda_stats().peak_registrations == 3);
  }
  // Every copy completed before its pages were unregistered (else the fake counts a misuse).
  for (std::size_t page = 0; page < 6; ++page)
    CHECK(target.data()[page * kPage + 7] == std::byte(page + 1));
  check_clean();
}

TEST_CASE("a group whose copies were enqueued but not fenced is fenced when the registrations go") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  fake_cuda_set_copy_delay_us(20000);
  Mapping mapping(1);
  FakeDeviceBuffer target(kPage);
  CudaStream stream(cuda, "cuda:0");
  {
    HostRegistrations registrations(cuda, stream.get(), 2);
    REQUIRE(registrations.add(mapping.data(), {{0, kPage}}));
    REQUIRE(cuda.memcpy_async(target.data(), mapping.data(), kPage, kCudaMemcpyHostToDevice,
                              stream.get()) == 0);
    // An exception here (the next copy failing, say) skips fence(); the destructor must still
    // wait for the copy before unregistering the pages it reads.
  }
  CHECK(target.data()[kPage - 1] == std::byte{1});
  check_clean();
}

TEST_CASE("a refused registration returns false and leaves nothing of the group registered") {
  const CudaApi& cuda = fake_cuda();
  fake_cuda_reset();
  Mapping mapping(4);
  CudaStream stream(cuda, "cuda:0");
  HostRegistrations registrations(cuda, stream.get(), 2);
  // The group's first range registers, the second is refused: the first must be undone.
  fake_cuda_set_register_limit(1);
  CHECK_FALSE(registrations.add(mapping.data(), {{0, kPage}, {2 * kPage, 3 * kPage}}));
  CHECK(registrations.groups() == 0);
  CHECK(fake_cuda_stats().live_registrations == 0);
  CHECK(cuda.get_last_error() == kCudaSuccess);  // cleared for whoever uses CUDA next

  // No event for the group: refused the same way.
  fake_cuda_set_register_limit(-1);
  fake_cuda_fail_call("cudaEventCreateWithFlags", 2, 0);
  CHECK_FALSE(registrations.add(mapping.data(), {{0, kPage}}));
  CHECK(fake_cuda_stats().live_registrations == 0);
  CHECK(cuda.get_last_error() == kCudaSuccess);

  REQUIRE(registrations.add(mapping.data(), {{0, kPage}}));
  registrations.fence();
  CHECK(fake_cuda_stats().misuse == 0);
}

TEST_CASE("the fake CUDA runtime reports unregistering twice or under a pending copy") {
  fake_cuda();
  fake_cuda_reset();
  Mapping mapping(1);
  FakeDeviceBuffer target(kPage);
  void* pages = const_cast<std::byte*>(mapping.data());
  REQUIRE(cudaHostRegister(pages, kPage, 0x08) == 0);
  REQUIRE(cudaHostUnregister(pages) == 0);
  CHECK(cudaHostUnregister(pages) == 713);
  CHECK(fake_cuda_stats().misuse == 1);
  CHECK(std::string(fake_cuda_last_misuse()).find("not registered") != std::string::npos);

  void* stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, 1) == 0);
  REQUIRE(cudaHostRegister(pages, kPage, 0x08) == 0);
  fake_cuda_hold_copies(1);
  REQUIRE(cudaMemcpyAsync(target.data(), pages, kPage, 1, stream) == 0);
  REQUIRE(cudaHostUnregister(pages) == 0);  // CUDA accepts it; the copy may then read anything
  CHECK(fake_cuda_stats().misuse == 2);
  CHECK(std::string(fake_cuda_last_misuse()) ==
        "cudaHostUnregister of memory a pending copy reads");
  fake_cuda_hold_copies(0);
  REQUIRE(cudaStreamDestroy(stream) == 0);
  fake_cuda_reset();
}
