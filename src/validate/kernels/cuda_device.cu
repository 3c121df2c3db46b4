#include <cuda_runtime.h>

#include <cstdio>

#include "gpucache/common/cuda_watch.hpp"
#include "kernels/cuda_device.cuh"

namespace gpucache::detail {

int cuda_device_count() noexcept {
  int count = 0;
  // The process's first CUDA call: it loads and initialises the driver.
  if (watched_call("cudaGetDeviceCount (the kernels' first call: driver initialisation)",
                   [&] { return cudaGetDeviceCount(&count); }) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error so later calls start clean
    return 0;
  }
  return count;
}

std::string cuda_device_description(int device) {
  cudaDeviceProp properties{};
  if (watched_call("cudaGetDeviceProperties",
                   [&] { return cudaGetDeviceProperties(&properties, device); }) != cudaSuccess)
    return "cuda:" + std::to_string(device);
  char text[sizeof properties.name + 64];  // the name, up to 255 bytes, and the rest
  std::snprintf(text, sizeof text, "cuda:%d %s, %.1f GiB", device, properties.name,
                static_cast<double>(properties.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace gpucache::detail
