// For the tests of the runtime's internal components: the runtime's CudaApi table loaded from the
// fake CUDA runtime, plus small owners of the fake's memory so a failing check leaks nothing.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda_api.hpp"
#include "fake_cudart/fake_cudart.h"

namespace gpucache::test {

// The first CUDA use in the process decides which library the runtime loads; call this first.
inline const runtime::detail::CudaApi& fake_cuda() {
  static const bool selected = (::setenv("GPUCACHE_CUDART", GPUCACHE_FAKE_CUDART, 1), true);
  (void)selected;
  const auto& cuda = runtime::detail::require_cuda_api("test");
  REQUIRE(cuda.library == GPUCACHE_FAKE_CUDART);
  return cuda;
}

// "Device" memory of the fake (host memory that copies may write).
class FakeDeviceBuffer {
 public:
  explicit FakeDeviceBuffer(std::size_t size) : size_(size) {
    REQUIRE(cudaMalloc(&pointer_, size) == 0);
  }
  ~FakeDeviceBuffer() { cudaFree(pointer_); }
  FakeDeviceBuffer(const FakeDeviceBuffer&) = delete;
  FakeDeviceBuffer& operator=(const FakeDeviceBuffer&) = delete;
  std::byte* data() const { return static_cast<std::byte*>(pointer_); }
  std::size_t size() const { return size_; }

 private:
  void* pointer_ = nullptr;
  std::size_t size_;
};

// Pinned host memory of the fake (a valid copy source).
class FakePinnedBuffer {
 public:
  explicit FakePinnedBuffer(std::size_t size) { REQUIRE(cudaHostAlloc(&pointer_, size, 0) == 0); }
  ~FakePinnedBuffer() { cudaFreeHost(pointer_); }
  FakePinnedBuffer(const FakePinnedBuffer&) = delete;
  FakePinnedBuffer& operator=(const FakePinnedBuffer&) = delete;
  std::byte* data() const { return static_cast<std::byte*>(pointer_); }

 private:
  void* pointer_ = nullptr;
};

inline std::string what_of(const auto& body) {
  try {
    body();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace gpucache::test
