// One CUDA runtime per process (src/validate/kernels/cuda_kernels.hpp): the validate module's
// kernels, a shared module of their own, reach CUDA through the very library the runtime reader's
// loader opened. Proven with the fake runtime built as libcudart.so.<major> (the soname the
// kernels' module needs) and named by $GPUCACHE_CUDART: a knob turned on the fake is seen through
// the kernels, and their calls, streams and allocations are counted by that one fake. Built only
// with the CUDA backend; runs on every machine (no GPU is touched).
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "cuda_api.hpp"
#include "fake_cudart/fake_cudart.h"
#include "gpucache/common/cuda_runtime_library.hpp"
#include "gpucache/device.hpp"
#include "kernels/cuda_kernels.hpp"

namespace {

// The fake's knobs, looked up in the library the process loaded (RTLD_LOCAL: not global).
struct FakeKnobs {
  void (*set_device_count)(int);
  void (*reset)();
  FakeCudaStats (*stats)();
};

FakeKnobs fake_knobs(void* handle) {
  FakeKnobs knobs{};
  knobs.set_device_count =
      reinterpret_cast<void (*)(int)>(::dlsym(handle, "fake_cuda_set_device_count"));
  knobs.reset = reinterpret_cast<void (*)()>(::dlsym(handle, "fake_cuda_reset"));
  knobs.stats = reinterpret_cast<FakeCudaStats (*)()>(::dlsym(handle, "fake_cuda_stats"));
  REQUIRE((knobs.set_device_count != nullptr));
  REQUIRE((knobs.reset != nullptr));
  REQUIRE((knobs.stats != nullptr));
  return knobs;
}

}  // namespace

TEST_CASE("the kernels' module and the runtime reader share the process's one CUDA runtime") {
  // Before anything loads CUDA: this process's runtime is the fake.
  REQUIRE(::setenv("GPUCACHE_CUDART", GPUCACHE_FAKE_LIBCUDART, 1) == 0);
  std::string why;
  const gpucache::CudaRuntimeLibrary* library = gpucache::cuda_runtime_library(&why);
  REQUIRE_MESSAGE(library, why);
  CHECK(library->name == GPUCACHE_FAKE_LIBCUDART);
  const FakeKnobs fake = fake_knobs(library->handle);
  fake.reset();
  fake.set_device_count(3);

  const auto* api = gpucache::runtime::detail::load_cuda_api(&why);
  REQUIRE_MESSAGE(api, why);
  CHECK(api->library == GPUCACHE_FAKE_LIBCUDART);
  const gpucache::detail::CudaKernels* kernels = gpucache::detail::cuda_kernels(&why);
  REQUIRE_MESSAGE(kernels, why);
  CHECK(gpucache::detail::cuda_kernels_path().find("libgpucache_cuda_kernels") !=
        std::string::npos);

  // The same function, at the same address, for both (the reader's calls go through a watch).
  CHECK(kernels->runtime_function() ==
        reinterpret_cast<const void*>(api->resolved->get_device_count));
  // The knob set on the process's fake comes back through the kernels and through the reader.
  CHECK(kernels->device_count() == 3);
  int count = 0;
  CHECK(api->get_device_count(&count) == 0);
  CHECK(count == 3);
  CHECK(fake.stats().device_count_calls == 2);
  CHECK(gpucache::cuda_available());

  // The kernels' staging (two streams, two events, a counters buffer) is made and freed in the
  // same fake: the reader's loader would see these very objects.
  gpucache::detail::CudaStaging* staging = kernels->staging_create(1);
  REQUIRE(staging);
  CHECK(fake.stats().live_streams == 2);
  CHECK(fake.stats().live_events == 2);
  CHECK(fake.stats().live_device_allocations == 1);
  kernels->staging_destroy(staging);
  CHECK(fake.stats().live_streams == 0);
  CHECK(fake.stats().live_events == 0);
  CHECK(fake.stats().live_device_allocations == 0);
  CHECK(fake.stats().misuse == 0);

  fake.set_device_count(0);
  CHECK(kernels->device_count() == 0);
  CHECK_FALSE(gpucache::cuda_available());
}
