#include "cuda_api.hpp"

#include <dlfcn.h>

#include <string>

#include "gpucache/common/cuda_runtime_library.hpp"
#include "gpucache/error.hpp"

namespace gpucache::runtime::detail {
namespace {

struct Loaded {
  CudaApi api{};
  bool ok = false;
  std::string why;
};

template <typename F>
bool resolve(void* handle, const char* name, F& out, std::string& why) {
  out = reinterpret_cast<F>(::dlsym(handle, name));
  if (out == nullptr) why = std::string("symbol ") + name + " is missing";
  return out != nullptr;
}

bool resolve_all(void* handle, CudaApi& api, std::string& why) {
  return resolve(handle, "cudaGetDeviceCount", api.get_device_count, why) &&
         resolve(handle, "cudaSetDevice", api.set_device, why) &&
         resolve(handle, "cudaGetDevice", api.get_device, why) &&
         resolve(handle, "cudaMemGetInfo", api.mem_get_info, why) &&
         resolve(handle, "cudaMalloc", api.malloc, why) &&
         resolve(handle, "cudaFree", api.free, why) &&
         resolve(handle, "cudaHostAlloc", api.host_alloc, why) &&
         resolve(handle, "cudaFreeHost", api.free_host, why) &&
         resolve(handle, "cudaHostRegister", api.host_register, why) &&
         resolve(handle, "cudaHostUnregister", api.host_unregister, why) &&
         resolve(handle, "cudaHostGetDevicePointer", api.host_get_device_pointer, why) &&
         resolve(handle, "cudaMemcpyAsync", api.memcpy_async, why) &&
         resolve(handle, "cudaStreamCreateWithFlags", api.stream_create_with_flags, why) &&
         resolve(handle, "cudaStreamDestroy", api.stream_destroy, why) &&
         resolve(handle, "cudaStreamSynchronize", api.stream_synchronize, why) &&
         resolve(handle, "cudaStreamWaitEvent", api.stream_wait_event, why) &&
         resolve(handle, "cudaEventCreateWithFlags", api.event_create_with_flags, why) &&
         resolve(handle, "cudaEventRecord", api.event_record, why) &&
         resolve(handle, "cudaEventSynchronize", api.event_synchronize, why) &&
         resolve(handle, "cudaEventQuery", api.event_query, why) &&
         resolve(handle, "cudaEventDestroy", api.event_destroy, why) &&
         resolve(handle, "cudaGetLastError", api.get_last_error, why) &&
         resolve(handle, "cudaGetErrorString", api.get_error_string, why);
}

Loaded load() {
  Loaded loaded;
  // The library is the process's one CUDA runtime (common's cuda_runtime_library), the same one
  // the validate module's kernels are bound to.
  const CudaRuntimeLibrary* library = cuda_runtime_library(&loaded.why);
  if (!library) return loaded;
  void* handle = library->handle;
  const std::string& chosen = library->name;
  // The handle is never closed: function pointers handed out must stay valid until exit.
  if (!resolve_all(handle, loaded.api, loaded.why)) {
    loaded.why = chosen + ": " + loaded.why;
    return loaded;
  }
  loaded.api.library = chosen;
  loaded.ok = true;
  return loaded;
}

const Loaded& loaded_once() {
  static const Loaded loaded = load();
  return loaded;
}

}  // namespace

const CudaApi* load_cuda_api(std::string* why) noexcept {
  try {
    const Loaded& loaded = loaded_once();
    if (!loaded.ok && why) *why = loaded.why;
    return loaded.ok ? &loaded.api : nullptr;
  } catch (...) {
    if (why) *why = "out of memory while loading the CUDA runtime";
    return nullptr;
  }
}

const CudaApi& require_cuda_api(const std::string& what) {
  std::string why;
  const CudaApi* api = load_cuda_api(&why);
  if (!api) throw Error("", what, "CUDA is not usable: " + why);
  return *api;
}

std::string cuda_error_text(const CudaApi& api, cuda_error_t status) {
  const char* text = api.get_error_string(status);
  std::string out = std::string(text ? text : "unknown CUDA error") + " (CUDA error " +
                    std::to_string(status) + ")";
  // What the two commonest start-up failures mean, in plain words.
  if (status == 35)  // cudaErrorInsufficientDriver
    out += ": no NVIDIA driver is loaded on this machine, or it is older than the CUDA runtime " +
           api.library + "; install or update the driver, or load with device=\"cpu\"";
  else if (status == 100)  // cudaErrorNoDevice
    out +=
        ": this machine has no CUDA GPU that this process may use (check "
        "CUDA_VISIBLE_DEVICES); load with device=\"cpu\"";
  return out;
}

void check_cuda(const CudaApi& api, cuda_error_t status, const std::string& location,
                const std::string& call) {
  if (status != kCudaSuccess)
    throw Error("", location, call + " failed: " + cuda_error_text(api, status));
}

}  // namespace gpucache::runtime::detail
