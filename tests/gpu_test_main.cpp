// Entry point for test_gpu_*.cpp: runs the doctest cases only when a CUDA device is usable and
// otherwise exits 77, which CTest reports as "skipped" (SKIP_RETURN_CODE).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "gpucache/device.hpp"

int main(int argc, char** argv) {
  if (!gpucache::cuda_available()) {
    // Why, in resolve_device's words (no runtime, no kernels' module, no device), so a skip on a
    // machine that has a GPU is explained in the test's output (scripts/gpu-check.sh fails on it).
    std::string reason;
    gpucache::resolve_device(gpucache::Device::automatic, &reason);
    std::printf("%s: skipping GPU tests\n", reason.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
