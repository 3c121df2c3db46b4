// Loads libgpucache_cuda_kernels.so (cuda_kernels.hpp). Compiled into the validate module when the
// build has the CUDA backend; links no CUDA.
#include "kernels/cuda_kernels.hpp"

#include <dlfcn.h>
#include <glob.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gpucache/common/cuda_runtime_library.hpp"
#include "gpucache/common/cuda_watch.hpp"

#ifndef GPUCACHE_CUDA_KERNELS_FILE
#error "GPUCACHE_CUDA_KERNELS_FILE (the module's file name) must be defined by the build"
#endif

namespace gpucache::detail {
namespace {

struct Loaded {
  const CudaKernels* table = nullptr;
  std::string path, why;
};

bool is_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Where the module may be, in order (see cuda_kernels.hpp).
std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* path = std::getenv("GPUCACHE_CUDA_KERNELS"); path && *path) {
    out.emplace_back(path);
    return out;  // an explicit choice is the only one
  }
  const std::string file = GPUCACHE_CUDA_KERNELS_FILE;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&cuda_kernels), &info) && info.dli_fname &&
      *info.dli_fname) {
    const std::string here = directory_of(info.dli_fname);
    out.push_back(here + "/" + file);  // the Python extension: the module is beside it
#ifdef GPUCACHE_CUDA_KERNELS_INSTALL_REL
    out.push_back(here + "/" GPUCACHE_CUDA_KERNELS_INSTALL_REL "/" + file);  // cmake --install
#endif
    // pip install: the command is in the environment's bin, the module in its gpucache package.
    for (const char* site :
         {"/../lib/python3*/site-packages/gpucache/", "/../lib/python3*/dist-packages/gpucache/"}) {
      glob_t found{};
      if (::glob((here + site + file).c_str(), 0, nullptr, &found) == 0)
        for (std::size_t i = 0; i < found.gl_pathc; ++i) out.emplace_back(found.gl_pathv[i]);
      ::globfree(&found);
    }
  }
#ifdef GPUCACHE_CUDA_KERNELS_BUILD_PATH
  out.emplace_back(GPUCACHE_CUDA_KERNELS_BUILD_PATH);  // binaries run from the build tree
#endif
  return out;
}

Loaded load() {
  Loaded loaded;
  std::string why;
  const CudaRuntimeLibrary* runtime = cuda_runtime_library(&why);
  if (!runtime) {
    loaded.why = why;
    return loaded;
  }
  std::string tried;
  for (const std::string& path : candidates()) {
    if (!is_file(path)) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    // RTLD_LOCAL: the module's symbols stay its own. Its libcudart.so.N is matched by soname to
    // the runtime loaded above when the major versions agree; the check below says when not.
    void* handle;
    {
      // The module's initialisers register its kernels with the CUDA runtime while the loader's
      // lock is held: traced, so a hang there shows.
      CudaCallWatch watch("dlopen(%s) of the CUDA kernels", path.c_str());
      handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      watch.result(handle ? 0 : -1);
    }
    if (!handle) {
      const char* message = ::dlerror();
      loaded.why = "the CUDA kernels " + path +
                   " could not be loaded: " + (message ? message : "unknown error");
      return loaded;
    }
    using Entry = const CudaKernels* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, "gpucache_cuda_kernels_v1"));
    const CudaKernels* table = entry ? entry() : nullptr;
    if (!table || table->version != kCudaKernelsVersion || table->size != sizeof(CudaKernels)) {
      loaded.why = "the CUDA kernels " + path +
                   " are of another gpucache build than this one; rebuild or reinstall gpucache";
      return loaded;
    }
    const void* ours = ::dlsym(runtime->handle, "cudaGetDeviceCount");
    const void* theirs = table->runtime_function();
    if (ours == nullptr || ours != theirs) {
      Dl_info where{};
      const std::string other = ::dladdr(theirs, &where) && where.dli_fname ? where.dli_fname : "?";
      loaded.why = "the CUDA kernels " + path + " are bound to the CUDA runtime " + other +
                   ", not to " + runtime->name +
                   ", which this process loaded (two CUDA runtimes in one process are refused; "
                   "set GPUCACHE_CUDART to the libcudart of the CUDA version gpucache was built "
                   "with)";
      return loaded;
    }
    loaded.table = table;
    loaded.path = path;
    cuda_debug("the CUDA kernels: %s, bound to %s", path.c_str(), runtime->name.c_str());
    return loaded;
  }
  loaded.why = "the CUDA kernels " + std::string(GPUCACHE_CUDA_KERNELS_FILE) +
               " were not found (looked at " + tried + ")";
  return loaded;
}

const Loaded& loaded_once() {
  static const Loaded loaded = load();
  return loaded;
}

}  // namespace

const CudaKernels* cuda_kernels(std::string* why) noexcept {
  try {
    const Loaded& loaded = loaded_once();
    if (!loaded.table && why) *why = loaded.why;
    return loaded.table;
  } catch (...) {
    if (why) *why = "out of memory while loading the CUDA kernels";
    return nullptr;
  }
}

std::string cuda_kernels_path() {
  return cuda_kernels() ? loaded_once().path : std::string();
}

}  // namespace gpucache::detail
