// Entry point for test_gpu_*.cpp: runs the doctest cases only when a CUDA device is usable and
// otherwise exits 77, which CTest reports as "skipped" (SKIP_RETURN_CODE).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "gpucache/device.hpp"

int main(int argc, char** argv) {
  if (!gpucache::cuda_available()) {
    std::puts("no usable CUDA device: skipping GPU tests");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
