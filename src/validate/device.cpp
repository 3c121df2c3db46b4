#include "gpucache/device.hpp"

#include "gpucache/error.hpp"

#ifdef GPUCACHE_HAVE_CUDA
#include "gpucache/common/cuda_watch.hpp"
#include "kernels/cuda_kernels.hpp"
#endif

namespace gpucache {

bool cuda_available() noexcept {
#ifdef GPUCACHE_HAVE_CUDA
  std::string why;
  const detail::CudaKernels* kernels = detail::cuda_kernels(&why);
  const int count = kernels ? kernels->device_count() : 0;
  cuda_debug("cuda_available: %d device(s)%s%s", count, kernels ? "" : ", ", why.c_str());
  return count > 0;
#else
  return false;
#endif
}

Device resolve_device(Device requested, std::string* reason) {
  std::string line;
#ifdef GPUCACHE_HAVE_CUDA
  // Without the CUDA runtime or the kernels' module the reason says which and why.
  std::string why;
  const detail::CudaKernels* kernels = detail::cuda_kernels(&why);
  const bool usable = kernels && kernels->device_count() > 0;
  if (usable)
    line = kernels->device_description(0);
  else if (!kernels)
    line = "no usable CUDA device (" + why + ")";
  else
    line = "no usable CUDA device";
#else
  const bool usable = false;
  line = "this build has no CUDA backend";
#endif
  if (requested == Device::cuda && !usable)
    throw Error("", "--device cuda", "CUDA was requested but " + line);
  const Device chosen =
      requested == Device::cpu ? Device::cpu : (usable ? Device::cuda : Device::cpu);
  if (reason)
    *reason = chosen == Device::cuda ? "device: cuda (" + line + ")" : "device: cpu (" + line + ")";
  return chosen;
}

}  // namespace gpucache
