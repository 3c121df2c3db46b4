#include "cuda_api.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <string>
#include <type_traits>

#include "gpucache/common/cuda_runtime_library.hpp"
#include "gpucache/common/cuda_watch.hpp"
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

// The functions as resolved, for the watched wrappers below (never destroyed: CUDA may be called
// from destructors during exit).
const CudaApi* unwatched_api = nullptr;

// "name(1, 0x7f..., 4096)" into out.
template <class... Args>
void describe(char (&out)[200], const char* name, Args... args) {
  std::size_t used = 0;
  const auto append = [&](const char* format, auto value) {
    if (used >= sizeof out) return;
    const int written = std::snprintf(out + used, sizeof out - used, format, value);
    if (written > 0) used += static_cast<std::size_t>(written);
  };
  append("%s(", name);
  bool first = true;
  const auto argument = [&](auto value) {
    if (!first) append("%s", ", ");
    first = false;
    using T = decltype(value);
    if constexpr (std::is_pointer_v<T>)
      append("%p", static_cast<const void*>(value));
    else if constexpr (std::is_signed_v<T>)
      append("%lld", static_cast<long long>(value));
    else
      append("%llu", static_cast<unsigned long long>(value));
  };
  (argument(args), ...);
  append("%s", ")");
}

// A CudaApi entry that runs the resolved function inside a CudaCallWatch: every call into CUDA
// that may block (all but the error queries) is reported when it does not return, and traced with
// GPUCACHE_DEBUG_CUDA (cuda_watch.hpp). The real runtime blocks where the fake does not: the first
// call initialises the driver, cudaSetDevice and the first allocation or stream create the
// context, cudaFree and cudaFreeHost wait for the whole device, cudaHostRegister pins (and may
// fault in) every page of its range.
template <auto Member>
struct Watched;
template <class R, class... Args, R (*CudaApi::*Member)(Args...)>
struct Watched<Member> {
  static inline const char* name = "?";
  static R call(Args... args) {
    char text[200];
    describe(text, name, args...);
    CudaCallWatch watch("%s", text);
    const R status = (unwatched_api->*Member)(args...);
    watch.result(static_cast<int>(status));
    return status;
  }
};

template <auto Member>
void watch_entry(CudaApi& api, const char* name) {
  Watched<Member>::name = name;
  api.*Member = &Watched<Member>::call;
}

void watch_all(CudaApi& api) {
  auto* unwatched = new CudaApi(api);
  unwatched->resolved = unwatched;
  unwatched_api = unwatched;
  api.resolved = unwatched;
  watch_entry<&CudaApi::get_device_count>(api, "cudaGetDeviceCount");
  watch_entry<&CudaApi::set_device>(api, "cudaSetDevice");
  watch_entry<&CudaApi::mem_get_info>(api, "cudaMemGetInfo");
  watch_entry<&CudaApi::malloc>(api, "cudaMalloc");
  watch_entry<&CudaApi::free>(api, "cudaFree");
  watch_entry<&CudaApi::host_alloc>(api, "cudaHostAlloc");
  watch_entry<&CudaApi::free_host>(api, "cudaFreeHost");
  watch_entry<&CudaApi::host_register>(api, "cudaHostRegister");
  watch_entry<&CudaApi::host_unregister>(api, "cudaHostUnregister");
  watch_entry<&CudaApi::host_get_device_pointer>(api, "cudaHostGetDevicePointer");
  watch_entry<&CudaApi::memcpy_async>(api, "cudaMemcpyAsync");
  watch_entry<&CudaApi::stream_create_with_flags>(api, "cudaStreamCreateWithFlags");
  watch_entry<&CudaApi::stream_destroy>(api, "cudaStreamDestroy");
  watch_entry<&CudaApi::stream_synchronize>(api, "cudaStreamSynchronize");
  watch_entry<&CudaApi::stream_wait_event>(api, "cudaStreamWaitEvent");
  watch_entry<&CudaApi::event_create_with_flags>(api, "cudaEventCreateWithFlags");
  watch_entry<&CudaApi::event_record>(api, "cudaEventRecord");
  watch_entry<&CudaApi::event_synchronize>(api, "cudaEventSynchronize");
  watch_entry<&CudaApi::event_query>(api, "cudaEventQuery");
  watch_entry<&CudaApi::event_destroy>(api, "cudaEventDestroy");
  // cudaGetDevice, cudaGetLastError and cudaGetErrorString only read the runtime's state.
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
  watch_all(loaded.api);
  cuda_debug("the runtime reader uses the CUDA runtime %s", chosen.c_str());
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
