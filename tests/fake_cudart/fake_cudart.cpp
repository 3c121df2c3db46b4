// A stand-in for libcudart that the runtime loads through $GPUCACHE_CUDART in
// test_runtime_device.cpp, so the device load path (layout, registration, fallback, staging ring,
// verification, cleanup) is exercised on machines without a GPU. "Device" memory is host memory.
// It is strict where the real runtime is lenient, to catch design mistakes:
// - copies run asynchronously, in order, on a worker thread per stream, after a short delay, so
//   a staging buffer reused before its event completed shows up as wrong data;
// - cudaMemcpyAsync requires a pinned source (registered or cudaHostAlloc'd) and a destination
//   inside one cudaMalloc'd allocation;
// - registering read-only memory requires cudaHostRegisterReadOnly.
// Counters and knobs are reached through the fake_cuda_* functions.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "fake_cudart.h"

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kMemoryAllocation = 2;
constexpr int kInvalidDevice = 101;
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

struct Event {
  std::mutex mutex;
  std::condition_variable changed;
  std::uint64_t recorded = 0, completed = 0;
};

struct State {
  std::mutex mutex;
  FakeCudaStats stats{};
  std::size_t free_memory = std::size_t{64} << 30;
  std::size_t total_memory = std::size_t{80} << 30;
  int device_count = 1;
  int current_device = 0;
  int register_fails = 0;
  int last_error = kSuccess;
  std::map<std::uintptr_t, std::size_t> device_allocations;  // base → size
  std::map<std::uintptr_t, std::size_t> pinned;              // registered or host-allocated
  std::map<std::uintptr_t, bool> host_allocations;           // base → mapped flag
};

State& state() {
  static State* instance = new State;  // never destroyed: streams may outlive static teardown
  return *instance;
}

int fail(int status) {
  state().last_error = status;
  return status;
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

}  // namespace

extern "C" {

void fake_cuda_reset(void) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  s.stats = {};
  s.free_memory = std::size_t{64} << 30;
  s.device_count = 1;
  s.register_fails = 0;
  s.last_error = kSuccess;
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
FakeCudaStats fake_cuda_stats(void) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  FakeCudaStats stats = s.stats;
  stats.live_device_allocations = s.device_allocations.size();
  stats.live_host_allocations = s.host_allocations.size();
  stats.live_registrations = s.pinned.size() - s.host_allocations.size();
  return stats;
}

int cudaGetDeviceCount(int* count) {
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
  if (size > s.free_memory) return fail(kMemoryAllocation);
  *pointer = std::aligned_alloc(256, (size + 255) / 256 * 256);
  if (!*pointer) return fail(kMemoryAllocation);
  std::memset(*pointer, 0xAB, size);  // garbage, so a missed copy is visible
  s.device_allocations[reinterpret_cast<std::uintptr_t>(*pointer)] = size;
  ++s.stats.mallocs;
  return kSuccess;
}
int cudaFree(void* pointer) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (!pointer) return kSuccess;
  if (!s.device_allocations.erase(reinterpret_cast<std::uintptr_t>(pointer)))
    return fail(kInvalidValue);
  std::free(pointer);
  return kSuccess;
}
int cudaHostAlloc(void** pointer, size_t size, unsigned flags) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  *pointer = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  if (!*pointer) return fail(kMemoryAllocation);
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
  if (!s.host_allocations.erase(address)) return fail(kInvalidValue);
  s.pinned.erase(address);
  std::free(pointer);
  return kSuccess;
}
int cudaHostRegister(void* pointer, size_t size, unsigned flags) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (s.register_fails) return fail(kInvalidValue);
  // The runtime's mappings are PROT_READ, which CUDA registers only with the read-only flag.
  if (!(flags & kRegisterReadOnly)) return fail(kInvalidValue);
  if (inside(s.pinned, pointer, 1)) return fail(712);
  s.pinned[reinterpret_cast<std::uintptr_t>(pointer)] = size;
  ++s.stats.registers;
  return kSuccess;
}
int cudaHostUnregister(void* pointer) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  if (s.host_allocations.count(address) || !s.pinned.erase(address))
    return fail(kHostMemoryNotRegistered);
  return kSuccess;
}
int cudaHostGetDevicePointer(void** device_pointer, void* host_pointer, unsigned flags) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  const auto it = s.host_allocations.find(reinterpret_cast<std::uintptr_t>(host_pointer));
  if (flags != 0 || it == s.host_allocations.end() || !it->second) return fail(kInvalidValue);
  *device_pointer = host_pointer;
  return kSuccess;
}
int cudaMemcpyAsync(void* to, const void* from, size_t size, int kind, void* stream) {
  auto& s = state();
  {
    std::lock_guard lock(s.mutex);
    if (kind != 1 || !stream) return fail(kInvalidValue);
    if (!inside(s.pinned, from, size)) return fail(kInvalidValue);  // pageable source
    if (!inside(s.device_allocations, to, size)) return fail(kInvalidValue);
    ++s.stats.memcpy_calls;
    s.stats.memcpy_bytes += size;
  }
  static_cast<Stream*>(stream)->push([to, from, size] {
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    std::memcpy(to, from, size);
  });
  return kSuccess;
}
int cudaStreamCreateWithFlags(void** stream, unsigned) {
  *stream = new Stream;
  std::lock_guard lock(state().mutex);
  ++state().stats.streams;
  return kSuccess;
}
int cudaStreamDestroy(void* stream) {
  static_cast<Stream*>(stream)->drain();
  delete static_cast<Stream*>(stream);
  return kSuccess;
}
int cudaStreamSynchronize(void* stream) {
  static_cast<Stream*>(stream)->drain();
  return kSuccess;
}
int cudaEventCreateWithFlags(void** event, unsigned) {
  *event = new Event;
  return kSuccess;
}
int cudaEventRecord(void* event_pointer, void* stream) {
  auto* event = static_cast<Event*>(event_pointer);
  if (!stream) return fail(kInvalidValue);  // the runtime only uses its own stream
  std::uint64_t ticket;
  {
    std::lock_guard lock(event->mutex);
    ticket = ++event->recorded;
  }
  static_cast<Stream*>(stream)->push([event, ticket] {
    std::lock_guard lock(event->mutex);
    event->completed = std::max(event->completed, ticket);
    event->changed.notify_all();
  });
  return kSuccess;
}
int cudaEventSynchronize(void* event_pointer) {
  auto* event = static_cast<Event*>(event_pointer);
  std::unique_lock lock(event->mutex);
  event->changed.wait(lock, [event] { return event->completed >= event->recorded; });
  return kSuccess;
}
int cudaEventDestroy(void* event) {
  delete static_cast<Event*>(event);
  return kSuccess;
}
int cudaGetLastError(void) {
  const int error = state().last_error;
  state().last_error = kSuccess;
  return error;
}
const char* cudaGetErrorString(int error) {
  switch (error) {
    case kSuccess:
      return "no error";
    case kMemoryAllocation:
      return "out of memory";
    case kInvalidValue:
      return "invalid argument";
    default:
      return "fake CUDA error";
  }
}

}  // extern "C"
