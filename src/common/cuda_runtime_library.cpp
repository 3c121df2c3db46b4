#include "gpucache/common/cuda_runtime_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>

#include "gpucache/common/cuda_watch.hpp"

namespace gpucache {
namespace {

struct Loaded {
  CudaRuntimeLibrary library;
  std::string why;
};

Loaded load() {
  Loaded loaded;
  std::string errors;
  auto try_open = [&](const char* name, int flags) {
    void* handle;
    {
      // Loading runs the library's initialisers; traced so a first draw shows which file it was.
      CudaCallWatch watch("dlopen(%s%s)", name, flags & RTLD_NOLOAD ? ", RTLD_NOLOAD" : "");
      handle = ::dlopen(name, flags);
      watch.result(handle ? 0 : -1);
    }
    if (handle) {
      loaded.library = {handle, name};
    } else if (const char* message = ::dlerror(); message && !(flags & RTLD_NOLOAD)) {
      errors += std::string(errors.empty() ? "" : "; ") + message;
    }
    return handle != nullptr;
  };
  if (const char* override_path = std::getenv("GPUCACHE_CUDART"); override_path && *override_path) {
    try_open(override_path, RTLD_NOW | RTLD_LOCAL);
  } else {
    static constexpr const char* kNames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    // A runtime already in the process (PyTorch loads its own) comes first: sharing it avoids a
    // second copy of the CUDA runtime with its own state.
    for (const char* name : kNames)
      if (try_open(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) break;
    if (!loaded.library.handle)
      for (const char* name : kNames)
        if (try_open(name, RTLD_NOW | RTLD_LOCAL)) break;
  }
  if (!loaded.library.handle)
    loaded.why = "the CUDA runtime library could not be loaded (" + errors + ")";
  else if (cuda_debug_enabled()) {
    link_map* map = nullptr;
    const bool found = ::dlinfo(loaded.library.handle, RTLD_DI_LINKMAP, &map) == 0 && map;
    cuda_debug("the CUDA runtime of this process: %s (%s)", loaded.library.name.c_str(),
               found && map->l_name ? map->l_name : "?");
  }
  return loaded;
}

}  // namespace

const CudaRuntimeLibrary* cuda_runtime_library(std::string* why) noexcept {
  try {
    static const Loaded loaded = load();
    if (!loaded.library.handle && why) *why = loaded.why;
    return loaded.library.handle ? &loaded.library : nullptr;
  } catch (...) {
    if (why) *why = "out of memory while loading the CUDA runtime";
    return nullptr;
  }
}

}  // namespace gpucache
