// A stand-in for libcudart that the runtime loads through $GPUCACHE_CUDART in the runtime tests, so
// the device load path (layout, registration, fallback, staging ring, verification, cleanup) is
// exercised on machines without a GPU. "Device" memory is host memory.
// It is strict where the real runtime is lenient, to catch design mistakes:
// - copies run asynchronously, in order, on a worker thread per stream, after a delay, so work
//   that does not wait for them sees them unfinished;
// - cudaMemcpyAsync requires a pinned source (registered or cudaHostAlloc'd) and a destination
//   inside one cudaMalloc'd allocation;
// - registering read-only memory requires cudaHostRegisterReadOnly.
// It models the legacy default stream (handle 0, cudaStreamLegacy, cudaStreamPerThread: one stream
// here), which a consumer such as PyTorch's default stream uses, as an ordinary stream; the real
// one also waits for, and holds up, every blocking stream, so creating a stream without
// cudaStreamNonBlocking counts as misuse and that synchronisation never has to be modelled.
// What it does not model (docs/architecture.md, "What the fake CUDA runtime models"): calls that
// block for long on a real GPU (the first call, context creation, cudaFree/cudaFreeHost waiting
// for the whole device, pinning pages), kernels, and CUDA calls made from host callbacks.
// And it counts as misuse (FakeCudaStats::misuse, fake_cuda_last_misuse) what the real runtime
// accepts but what corrupts data or memory there:
// - the source of a copy changing between cudaMemcpyAsync and the copy running (a staging buffer
//   reused before its copy completed);
// - unregistering or freeing memory that a copy enqueued but not yet run reads or writes;
// - unregistering memory that is not registered (twice, say), freeing what was not allocated;
// - using a stream or event after destroying it (or one never created);
// - creating a blocking stream (without cudaStreamNonBlocking): see the legacy default stream.
// Counters and knobs are reached through the fake_cuda_* functions.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_cudart.h"

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kMemoryAllocation = 2;
constexpr int kInvalidDevice = 101;
constexpr int kInvalidResourceHandle = 400;
constexpr int kNotReady = 600;
constexpr int kHostMemoryAlreadyRegistered = 712;
constexpr int kHostMemoryNotRegistered = 713;
constexpr unsigned kRegisterReadOnly = 0x08;

struct Stream {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> work;
  bool busy = false;
  bool stopping = false;
  std::thread worker;

  Stream() {
    worker = std::thread([this] {
      std::unique_lock lock(mutex);
      for (;;) {
        changed.wait(lock, [this] { return stopping || !work.empty(); });
        if (work.empty()) return;
        auto task = std::move(work.front());
        work.pop_front();
        busy = true;
        lock.unlock();
        task();
        lock.lock();
        busy = false;
        changed.notify_all();
      }
    });
  }
  ~Stream() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    worker.join();
  }
  void push(std::function<void()> task) {
    {
      std::lock_guard lock(mutex);
      work.push_back(std::move(task));
    }
    changed.notify_all();
  }
  void drain() {
    std::unique_lock lock(mutex);
    changed.wait(lock, [this] { return work.empty() && !busy; });
  }
};

// Shared with the stream tasks that complete it, so destroying an event with a record pending (as
// CUDA allows) leaves them nothing dangling.
struct Event {
  std::mutex mutex;
  std::condition_variable changed;
  std::uint64_t recorded = 0, completed = 0;
  void wait_for(std::uint64_t ticket) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return completed >= ticket; });
  }
};

struct PendingCopy {
  const std::byte* from;
  std::byte* to;
  std::size_t size;
};

struct State {
  std::mutex mutex;
  FakeCudaStats stats{};
  std::size_t free_memory = std::size_t{64} << 30;
  std::size_t total_memory = std::size_t{80} << 30;
  int device_count = 1;
  int current_device = 0;
  int register_fails = 0;
  long register_limit = -1;
  unsigned copy_delay_us = 300;
  bool hold_copies = false;
  std::condition_variable copies_released;
  int last_error = kSuccess;
  std::string last_misuse;
  std::map<std::string, std::pair<int, unsigned>> injected;  // function → (error, calls to skip)
  std::map<std::uintptr_t, std::size_t> device_allocations;  // base → size
  std::map<std::uintptr_t, std::size_t> pinned;              // registered or host-allocated
  std::map<std::uintptr_t, bool> host_allocations;           // base → mapped flag
  std::map<void*, std::unique_ptr<Stream>> streams;
  std::unique_ptr<Stream> legacy;  // the legacy default stream, created at first use
  std::map<void*, std::shared_ptr<Event>> events;
  std::map<std::uint64_t, PendingCopy> pending;  // by ticket
  std::uint64_t next_copy = 0;
};

State& state() {
  static State* instance = new State;  // never destroyed: streams may outlive static teardown
  return *instance;
}

// With the state's mutex held.
int fail_locked(State& s, int status) {
  s.last_error = status;
  return status;
}
int fail(int status) {
  std::lock_guard lock(state().mutex);
  return fail_locked(state(), status);
}
int misuse_locked(State& s, const std::string& what, int status) {
  ++s.stats.misuse;
  s.last_misuse = what;
  return status == kSuccess ? kSuccess : fail_locked(s, status);
}
// The error injected for this call of `function`, or success.
int injected_locked(State& s, const char* function) {
  const auto it = s.injected.find(function);
  if (it == s.injected.end()) return kSuccess;
  if (it->second.second > 0) {
    --it->second.second;
    return kSuccess;
  }
  const int error = it->second.first;
  s.injected.erase(it);
  return fail_locked(s, error);
}

bool overlaps(const void* a, std::size_t a_size, const void* b, std::size_t b_size) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + b_size && y < x + a_size;
}

// A copy enqueued and not yet run that reads or writes [pointer, pointer + size).
bool copy_pending_on(const State& s, const void* pointer, std::size_t size) {
  for (const auto& [ticket, copy] : s.pending)
    if (overlaps(copy.from, copy.size, pointer, size) ||
        overlaps(copy.to, copy.size, pointer, size))
      return true;
  return false;
}

// True when [pointer, pointer + size) lies inside one entry of `ranges`.
bool inside(const std::map<std::uintptr_t, std::size_t>& ranges, const void* pointer,
            std::size_t size) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  auto it = ranges.upper_bound(address);
  if (it == ranges.begin()) return false;
  --it;
  return address >= it->first && address + size <= it->first + it->second;
}

// Handles that name the legacy default stream: 0, cudaStreamLegacy and cudaStreamPerThread.
bool is_default_stream(const void* handle) {
  const auto value = reinterpret_cast<std::uintptr_t>(handle);
  return value == 0 || value == 1 || value == 2;
}

Stream* find_stream_locked(State& s, void* handle, const char* call) {
  if (is_default_stream(handle)) {
    if (!s.legacy) s.legacy = std::make_unique<Stream>();
    return s.legacy.get();
  }
  const auto it = s.streams.find(handle);
  if (it != s.streams.end()) return it->second.get();
  misuse_locked(s, std::string(call) + " on a stream that does not exist (destroyed?)",
                kInvalidResourceHandle);
  return nullptr;
}

std::shared_ptr<Event> find_event(void* handle, const char* call) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  const auto it = s.events.find(handle);
  if (it != s.events.end()) return it->second;
  misuse_locked(s, std::string(call) + " on an event that does not exist (destroyed?)",
                kInvalidResourceHandle);
  return nullptr;
}

}  // namespace

extern "C" {

void fake_cuda_reset(void) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  s.stats = {};
  s.free_memory = std::size_t{64} << 30;
  s.device_count = 1;
  s.register_fails = 0;
  s.register_limit = -1;
  s.copy_delay_us = 300;
  s.hold_copies = false;
  s.copies_released.notify_all();
  s.last_error = kSuccess;
  s.last_misuse.clear();
  s.injected.clear();
}
void fake_cuda_set_free_memory(size_t bytes) {
  state().free_memory = bytes;
}
void fake_cuda_set_device_count(int count) {
  state().device_count = count;
}
void fake_cuda_set_register_fails(int fails) {
  state().register_fails = fails;
}
void fake_cuda_set_register_limit(int successes) {
  std::lock_guard lock(state().mutex);
  state().register_limit = successes;
}
void fake_cuda_set_copy_delay_us(unsigned microseconds) {
  std::lock_guard lock(state().mutex);
  state().copy_delay_us = microseconds;
}
void fake_cuda_hold_copies(int hold) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  s.hold_copies = hold != 0;
  s.copies_released.notify_all();
}
void fake_cuda_fail_call(const char* function, int error, unsigned skip) {
  std::lock_guard lock(state().mutex);
  state().injected[function] = {error, skip};
}
FakeCudaStats fake_cuda_stats(void) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  FakeCudaStats stats = s.stats;
  stats.live_device_allocations = s.device_allocations.size();
  stats.live_host_allocations = s.host_allocations.size();
  stats.live_registrations = s.pinned.size() - s.host_allocations.size();
  stats.live_streams = s.streams.size();
  stats.live_events = s.events.size();
  stats.pending_copies = s.pending.size();
  return stats;
}
const char* fake_cuda_last_misuse(void) {
  static thread_local std::string copy;
  std::lock_guard lock(state().mutex);
  copy = state().last_misuse;
  return copy.c_str();
}

int cudaGetDeviceCount(int* count) {
  {
    std::lock_guard lock(state().mutex);
    ++state().stats.device_count_calls;
  }
  *count = state().device_count;
  return state().device_count > 0 ? kSuccess : fail(100);
}
int cudaSetDevice(int device) {
  if (device < 0 || device >= state().device_count) return fail(kInvalidDevice);
  state().current_device = device;
  return kSuccess;
}
int cudaGetDevice(int* device) {
  *device = state().current_device;
  return kSuccess;
}
int cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = state().free_memory;
  *total_bytes = state().total_memory;
  return kSuccess;
}
int cudaMalloc(void** pointer, size_t size) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (const int error = injected_locked(s, "cudaMalloc")) return error;
  if (size > s.free_memory) return fail_locked(s, kMemoryAllocation);
  *pointer = std::aligned_alloc(256, (size + 255) / 256 * 256);
  if (!*pointer) return fail_locked(s, kMemoryAllocation);
  std::memset(*pointer, 0xAB, size);  // garbage, so a missed copy is visible
  s.device_allocations[reinterpret_cast<std::uintptr_t>(*pointer)] = size;
  ++s.stats.mallocs;
  return kSuccess;
}
int cudaFree(void* pointer) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (!pointer) return kSuccess;
  const auto it = s.device_allocations.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == s.device_allocations.end())
    return misuse_locked(s, "cudaFree of memory cudaMalloc did not return", kInvalidValue);
  if (copy_pending_on(s, pointer, it->second))
    misuse_locked(s, "cudaFree of memory a pending copy writes", kSuccess);
  s.device_allocations.erase(it);
  std::free(pointer);
  return kSuccess;
}
int cudaHostAlloc(void** pointer, size_t size, unsigned flags) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (const int error = injected_locked(s, "cudaHostAlloc")) return error;
  *pointer = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  if (!*pointer) return fail_locked(s, kMemoryAllocation);
  std::memset(*pointer, 0xCD, size);
  const auto address = reinterpret_cast<std::uintptr_t>(*pointer);
  s.pinned[address] = size;
  s.host_allocations[address] = (flags & 0x02) != 0;
  ++s.stats.host_allocs;
  return kSuccess;
}
int cudaFreeHost(void* pointer) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  if (!s.host_allocations.erase(address))
    return misuse_locked(s, "cudaFreeHost of memory cudaHostAlloc did not return", kInvalidValue);
  if (copy_pending_on(s, pointer, s.pinned[address]))
    misuse_locked(s, "cudaFreeHost of memory a pending copy reads", kSuccess);
  s.pinned.erase(address);
  std::free(pointer);
  return kSuccess;
}
int cudaHostRegister(void* pointer, size_t size, unsigned flags) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (const int error = injected_locked(s, "cudaHostRegister")) return error;
  if (s.register_fails || s.register_limit == 0) return fail_locked(s, kInvalidValue);
  // The runtime's mappings are PROT_READ, which CUDA registers only with the read-only flag.
  if (!(flags & kRegisterReadOnly)) return fail_locked(s, kInvalidValue);
  if (inside(s.pinned, pointer, 1)) return fail_locked(s, kHostMemoryAlreadyRegistered);
  if (s.register_limit > 0) --s.register_limit;
  s.pinned[reinterpret_cast<std::uintptr_t>(pointer)] = size;
  ++s.stats.registers;
  s.stats.peak_registrations = std::max<std::uint64_t>(s.stats.peak_registrations,
                                                       s.pinned.size() - s.host_allocations.size());
  return kSuccess;
}
int cudaHostUnregister(void* pointer) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  const auto it = s.pinned.find(address);
  if (s.host_allocations.count(address) || it == s.pinned.end())
    return misuse_locked(s, "cudaHostUnregister of memory that is not registered (twice?)",
                         kHostMemoryNotRegistered);
  if (copy_pending_on(s, pointer, it->second))
    misuse_locked(s, "cudaHostUnregister of memory a pending copy reads", kSuccess);
  s.pinned.erase(it);
  return kSuccess;
}
int cudaHostGetDevicePointer(void** device_pointer, void* host_pointer, unsigned flags) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  const auto it = s.host_allocations.find(reinterpret_cast<std::uintptr_t>(host_pointer));
  if (flags != 0 || it == s.host_allocations.end() || !it->second)
    return fail_locked(s, kInvalidValue);
  *device_pointer = host_pointer;
  return kSuccess;
}
int cudaMemcpyAsync(void* to, const void* from, size_t size, int kind, void* stream_handle) {
  auto& s = state();
  std::unique_lock lock(s.mutex);
  if (const int error = injected_locked(s, "cudaMemcpyAsync")) return error;
  Stream* stream = find_stream_locked(s, stream_handle, "cudaMemcpyAsync");
  if (!stream) return kInvalidResourceHandle;
  if (kind != 1) return fail_locked(s, kInvalidValue);
  if (!inside(s.pinned, from, size)) return fail_locked(s, kInvalidValue);  // pageable source
  if (!inside(s.device_allocations, to, size)) return fail_locked(s, kInvalidValue);
  ++s.stats.memcpy_calls;
  s.stats.memcpy_bytes += size;
  const std::uint64_t ticket = s.next_copy++;
  s.pending[ticket] = {static_cast<const std::byte*>(from), static_cast<std::byte*>(to), size};
  const auto delay = std::chrono::microseconds(s.copy_delay_us);
  lock.unlock();
  // What the copy must deliver: the source as it is now. A source that differs when the copy runs
  // was overwritten too early, and the real copy engine would deliver the new bytes.
  auto snapshot = std::make_shared<std::vector<std::byte>>(
      static_cast<const std::byte*>(from), static_cast<const std::byte*>(from) + size);
  stream->push([to, from, size, ticket, delay, snapshot] {
    auto& s = state();
    {
      std::unique_lock lock(s.mutex);
      s.copies_released.wait(lock, [&s] { return !s.hold_copies; });
    }
    std::this_thread::sleep_for(delay);
    const bool changed = std::memcmp(from, snapshot->data(), size) != 0;
    std::memcpy(to, from, size);
    std::lock_guard lock(s.mutex);
    if (changed)
      misuse_locked(s,
                    "the source of a cudaMemcpyAsync changed before the copy ran (a buffer "
                    "reused before its copy completed)",
                    kSuccess);
    s.pending.erase(ticket);
  });
  return kSuccess;
}
int cudaStreamCreateWithFlags(void** stream, unsigned flags) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (const int error = injected_locked(s, "cudaStreamCreateWithFlags")) return error;
  if (!(flags & 0x01))  // cudaStreamNonBlocking
    misuse_locked(s,
                  "a blocking stream (no cudaStreamNonBlocking): on a GPU it waits for and holds "
                  "up the legacy default stream, PyTorch's default stream",
                  kSuccess);
  auto created = std::make_unique<Stream>();
  *stream = created.get();
  s.streams[*stream] = std::move(created);
  ++s.stats.streams;
  return kSuccess;
}
int cudaStreamDestroy(void* handle) {
  auto& s = state();
  std::unique_ptr<Stream> stream;
  {
    std::lock_guard lock(s.mutex);
    if (is_default_stream(handle))
      return misuse_locked(s, "cudaStreamDestroy of the legacy default stream",
                           kInvalidResourceHandle);
    const auto it = s.streams.find(handle);
    if (it == s.streams.end())
      return misuse_locked(s, "cudaStreamDestroy of a stream that does not exist (twice?)",
                           kInvalidResourceHandle);
    stream = std::move(it->second);
    s.streams.erase(it);
  }
  stream->drain();  // CUDA lets the work finish after destroy returns; here it finishes before
  return kSuccess;
}
int cudaStreamSynchronize(void* handle) {
  Stream* stream;
  {
    std::lock_guard lock(state().mutex);
    if (const int error = injected_locked(state(), "cudaStreamSynchronize")) return error;
    stream = find_stream_locked(state(), handle, "cudaStreamSynchronize");
  }
  if (!stream) return kInvalidResourceHandle;
  stream->drain();
  return kSuccess;
}
int cudaStreamWaitEvent(void* handle, void* event_handle, unsigned flags) {
  auto& s = state();
  Stream* stream;
  {
    std::lock_guard lock(s.mutex);
    if (const int error = injected_locked(s, "cudaStreamWaitEvent")) return error;
    stream = find_stream_locked(s, handle, "cudaStreamWaitEvent");
    if (!stream) return kInvalidResourceHandle;
    if (flags != 0) return fail_locked(s, kInvalidValue);
  }
  const auto event = find_event(event_handle, "cudaStreamWaitEvent");
  if (!event) return kInvalidResourceHandle;
  std::uint64_t ticket;
  {
    std::lock_guard lock(event->mutex);
    ticket = event->recorded;  // the record that is the latest now, not a later one
  }
  stream->push([event, ticket] { event->wait_for(ticket); });
  return kSuccess;
}
int cudaEventCreateWithFlags(void** event, unsigned) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (const int error = injected_locked(s, "cudaEventCreateWithFlags")) return error;
  auto created = std::make_shared<Event>();
  *event = created.get();
  s.events[*event] = std::move(created);
  return kSuccess;
}
int cudaEventRecord(void* event_handle, void* stream_handle) {
  auto& s = state();
  Stream* stream;
  {
    std::lock_guard lock(s.mutex);
    if (const int error = injected_locked(s, "cudaEventRecord")) return error;
    stream = find_stream_locked(s, stream_handle, "cudaEventRecord");
    if (!stream) return kInvalidResourceHandle;
  }
  const auto event = find_event(event_handle, "cudaEventRecord");
  if (!event) return kInvalidResourceHandle;
  std::uint64_t ticket;
  {
    std::lock_guard lock(event->mutex);
    ticket = ++event->recorded;
  }
  stream->push([event, ticket] {
    std::lock_guard lock(event->mutex);
    event->completed = std::max(event->completed, ticket);
    event->changed.notify_all();
  });
  return kSuccess;
}
int cudaEventSynchronize(void* event_handle) {
  {
    std::lock_guard lock(state().mutex);
    if (const int error = injected_locked(state(), "cudaEventSynchronize")) return error;
  }
  const auto event = find_event(event_handle, "cudaEventSynchronize");
  if (!event) return kInvalidResourceHandle;
  std::uint64_t ticket;
  {
    std::lock_guard lock(event->mutex);
    ticket = event->recorded;
  }
  event->wait_for(ticket);
  return kSuccess;
}
int cudaEventQuery(void* event_handle) {
  {
    std::lock_guard lock(state().mutex);
    if (const int error = injected_locked(state(), "cudaEventQuery")) return error;
  }
  const auto event = find_event(event_handle, "cudaEventQuery");
  if (!event) return kInvalidResourceHandle;
  std::lock_guard lock(event->mutex);
  // Not ready is an answer, not an error: it does not become the last error.
  return event->completed >= event->recorded ? kSuccess : kNotReady;
}
int cudaEventDestroy(void* event_handle) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.events.erase(event_handle))
    return misuse_locked(s, "cudaEventDestroy of an event that does not exist (twice?)",
                         kInvalidResourceHandle);
  return kSuccess;
}
int cudaGetLastError(void) {
  std::lock_guard lock(state().mutex);
  const int error = state().last_error;
  state().last_error = kSuccess;
  return error;
}
const char* cudaGetErrorString(int error) {
  switch (error) {
    case kSuccess:
      return "no error";
    case kInvalidValue:
      return "invalid argument";
    case kMemoryAllocation:
      return "out of memory";
    case kInvalidResourceHandle:
      return "invalid resource handle";
    case kNotReady:
      return "device not ready";
    default:
      return "fake CUDA error";
  }
}

// What the validate module's CUDA kernels (libgpucache_cuda_kernels.so) need of a CUDA runtime,
// so that module loads against this fake (test_cuda_kernels_module.cpp): the fat binary
// registrations its constructors make succeed and do nothing; a device attribute is 1; anything
// that would run a kernel fails with cudaErrorNotSupported. Their signatures are cuda_runtime.h's
// with ints for enums and void* for structs.
constexpr int kNotSupported = 801;
void** __cudaRegisterFatBinary(void*) {
  static void* handle = nullptr;
  return &handle;
}
void __cudaRegisterFatBinaryEnd(void**) {}
void __cudaUnregisterFatBinary(void**) {}
void __cudaRegisterFunction(void**, const char*, char*, const char*, int, void*, void*, void*,
                            void*, int*) {}
void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {}
unsigned __cudaPushCallConfiguration(void*, void*, size_t, void*) {
  return 1;  // nonzero: the launch is skipped
}
int __cudaPopCallConfiguration(void*, void*, size_t*, void*) {
  return fail(kNotSupported);
}
int __cudaLaunchKernel(const void*, void*, void*, void**, size_t, void*) {
  return fail(kNotSupported);
}
int __cudaGetKernel(void**, const void*) {
  return fail(kNotSupported);
}
int cudaDeviceGetAttribute(int* value, int, int device) {
  if (device < 0 || device >= state().device_count) return fail(kInvalidDevice);
  *value = 1;
  return kSuccess;
}
int cudaFuncGetAttributes(void*, const void*) {
  return fail(kNotSupported);
}
int cudaGetDeviceProperties(void*, int) {
  return fail(kNotSupported);
}
const char* cudaGetErrorName(int error) {
  return error == kSuccess ? "cudaSuccess" : "cudaErrorFake";
}
int cudaMemcpy(void*, const void*, size_t, int) {
  return fail(kNotSupported);
}
int cudaMemsetAsync(void*, int, size_t, void*) {
  return fail(kNotSupported);
}
int cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int*, const void*, int, size_t,
                                                           unsigned) {
  return fail(kNotSupported);
}
int cudaPeekAtLastError(void) {
  std::lock_guard lock(state().mutex);
  return state().last_error;
}

}  // extern "C"
