// The CUDA steps every other GPU test relies on, one test case each, in the order they first
// happen in a load or a pack (label gpu; exits 77 without a GPU). On a new GPU machine this runs
// first (CTest runs test_gpu_* in name order): when something blocks, its trace
// (<test>.cuda-trace.log, GPUCACHE_DEBUG_CUDA) and the last case started say which step, with
// nothing of gpucache's own logic around it. Each step is timed in the test's output.
#include <doctest/doctest.h>

#ifdef GPUCACHE_TEST_CUDART
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "compute_backend.hpp"
#include "gpucache/common/cuda_watch.hpp"
#include "test_support.hpp"

using namespace gpucache;

namespace {

// Prints how long the step took, also when it fails.
class Step {
 public:
  explicit Step(const char* name) : name_(name), watch_("test step: %s", name) {
    std::printf("step: %s ...\n", name);
    std::fflush(stdout);
  }
  ~Step() {
    std::printf("step: %s: %.3f s\n", name_,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
    std::fflush(stdout);
  }

 private:
  const char* name_;
  CudaCallWatch watch_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace

TEST_CASE("1: the context is created (cudaSetDevice, cudaFree(nullptr))") {
  Step step("context creation");
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaFree(nullptr) == cudaSuccess);
  int version = 0;
  REQUIRE(cudaDriverGetVersion(&version) == cudaSuccess);
  int supported = -1;
  cudaDeviceGetAttribute(&supported, cudaDevAttrHostRegisterReadOnlySupported, 0);
  std::printf("driver API %d, cudaDevAttrHostRegisterReadOnlySupported %d\n", version, supported);
}

TEST_CASE("2: device memory and synchronous copies on the legacy default stream") {
  Step step("cudaMalloc, cudaMemcpy both ways, cudaFree");
  std::vector<std::uint32_t> in(1 << 18), out(in.size());
  std::iota(in.begin(), in.end(), 7u);
  void* device = nullptr;
  REQUIRE(cudaMalloc(&device, in.size() * 4) == cudaSuccess);
  CHECK(cudaMemcpy(device, in.data(), in.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(out.data(), device, out.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(cudaFree(device) == cudaSuccess);
  CHECK(out == in);
}

TEST_CASE("3: pinned memory, a non-blocking stream, an async copy and an event") {
  Step step("cudaHostAlloc, cudaStreamCreateWithFlags, cudaMemcpyAsync, cudaEventSynchronize");
  constexpr std::size_t bytes = 64 << 20;
  void *pinned = nullptr, *device = nullptr;
  REQUIRE(cudaHostAlloc(&pinned, bytes, cudaHostAllocPortable) == cudaSuccess);
  REQUIRE(cudaMalloc(&device, bytes) == cudaSuccess);
  std::memset(pinned, 0x5A, bytes);
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess);
  CHECK(cudaEventSynchronize(done) == cudaSuccess);  // never recorded: returns at once
  CHECK(cudaMemcpyAsync(device, pinned, bytes, cudaMemcpyHostToDevice, stream) == cudaSuccess);
  CHECK(cudaEventRecord(done, stream) == cudaSuccess);
  CHECK(cudaEventSynchronize(done) == cudaSuccess);
  unsigned char last = 0;
  CHECK(cudaMemcpy(&last, static_cast<char*>(device) + bytes - 1, 1, cudaMemcpyDeviceToHost) ==
        cudaSuccess);
  CHECK(last == 0x5A);
  CHECK(cudaEventDestroy(done) == cudaSuccess);
  CHECK(cudaStreamDestroy(stream) == cudaSuccess);
  CHECK(cudaFree(device) == cudaSuccess);
  CHECK(cudaFreeHost(pinned) == cudaSuccess);
}

TEST_CASE("4: a read-only file mapping registered in place, as the runtime's mapped source does") {
  Step step("cudaHostRegister(ReadOnly | Portable) of a MAP_PRIVATE PROT_READ file mapping");
  test_support::ScratchDir scratch;
  const std::string path = scratch / "shard";
  constexpr std::size_t bytes = 16 << 20;
  {
    std::vector<char> data(bytes, 0x33);
    std::FILE* file = std::fopen(path.c_str(), "wb");
    REQUIRE(file);
    REQUIRE(std::fwrite(data.data(), 1, bytes, file) == bytes);
    std::fclose(file);
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  void* mapping = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  REQUIRE(mapping != MAP_FAILED);
  const cudaError_t registered =
      cudaHostRegister(mapping, bytes, cudaHostRegisterReadOnly | cudaHostRegisterPortable);
  // A refusal is allowed (the runtime then reads with pread); it is printed to be known.
  std::printf("cudaHostRegister of the mapping: %s\n", cudaGetErrorString(registered));
  cudaGetLastError();
  if (registered == cudaSuccess) {
    void* device = nullptr;
    REQUIRE(cudaMalloc(&device, bytes) == cudaSuccess);
    CHECK(cudaMemcpy(device, mapping, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
    unsigned char first = 0;
    CHECK(cudaMemcpy(&first, device, 1, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(first == 0x33);
    CHECK(cudaFree(device) == cudaSuccess);
    CHECK(cudaHostUnregister(mapping) == cudaSuccess);
  }
  ::munmap(mapping, bytes);
}

TEST_CASE("5: the kernels' module runs a kernel (CUB's sort, then a validation chunk)") {
  Step step("libgpucache_cuda_kernels: sort_by_key and summarize_rows");
  detail::ComputeBackend cpu(Device::cpu, 0), cuda(Device::cuda, 0);
  std::mt19937_64 rng(5);
  std::vector<std::uint64_t> keys(10000), values(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    keys[i] = rng() % 1000;
    values[i] = i;
  }
  auto cpu_keys = keys, cpu_values = values;
  cpu.sort_by_key(cpu_keys.data(), cpu_values.data(), keys.size());
  cuda.sort_by_key(keys.data(), values.data(), keys.size());
  CHECK(keys == cpu_keys);
  CHECK(values == cpu_values);

  const std::uint64_t rows = 1000, dim = 64;
  std::vector<float> data(rows * dim);
  for (auto& x : data) x = static_cast<float>(rng() % 1000) / 100.0f;
  detail::SummaryParams params{};
  params.input = detail::InputType::f32;
  params.values = dim;
  params.hash = 1;
  std::vector<detail::ColumnSummary> on_cpu(rows), on_cuda(rows);
  const auto* bytes = reinterpret_cast<const std::byte*>(data.data());
  cpu.summarize_rows(params, bytes, rows, on_cpu.data());
  cuda.summarize_rows(params, bytes, rows, on_cuda.data());
  CHECK(std::memcmp(on_cpu.data(), on_cuda.data(), rows * sizeof(detail::ColumnSummary)) == 0);
}
#endif
