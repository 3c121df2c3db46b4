#include "destinations.hpp"

#include <cstdio>

namespace gpucache::runtime::detail {

CudaAllocation::~CudaAllocation() {
  // Errors are ignored: at interpreter exit the CUDA runtime may already be unloading.
  int previous = -1;
  cuda_.get_device(&previous);
  cuda_.set_device(device_);
  (cuda_.*release_)(pointer_);
  if (previous >= 0) cuda_.set_device(previous);
  cuda_.get_last_error();
}

std::string gib(std::uint64_t bytes) {
  const double value = static_cast<double>(bytes) / (1ull << 30);
  char text[32];
  std::snprintf(text, sizeof text, value >= 0.1 || bytes == 0 ? "%.2f" : "%.3g", value);
  return text;
}

}  // namespace gpucache::runtime::detail
