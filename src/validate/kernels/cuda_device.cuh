// Host-side queries about CUDA devices. Included only by code built with GPUCACHE_HAVE_CUDA; the
// declarations use no CUDA types, so plain C++ translation units may include this header.
#pragma once

#include <string>

namespace gpucache::detail {

// Number of usable CUDA devices; 0 when there is no driver or no device.
int cuda_device_count() noexcept;
// "cuda:N <name>, X GiB".
std::string cuda_device_description(int device);

}  // namespace gpucache::detail
