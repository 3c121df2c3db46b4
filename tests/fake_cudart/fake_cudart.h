// Knobs and counters of the fake CUDA runtime (fake_cudart.cpp) that the runtime tests load
// through $GPUCACHE_CUDART (test_runtime_device.cpp, test_c_api.cpp, test_runtime_<component>.cpp).
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint64_t mallocs;
  uint64_t host_allocs;
  uint64_t registers;
  uint64_t memcpy_calls;
  uint64_t memcpy_bytes;
  uint64_t streams;
  uint64_t live_device_allocations;
  uint64_t live_host_allocations;
  uint64_t live_registrations;
  uint64_t peak_registrations; /* most registrations alive at once since the reset */
  uint64_t live_streams;
  uint64_t live_events;
  uint64_t pending_copies; /* enqueued and not yet run */
  /* Calls the real runtime would accept but that are bugs in the caller: see fake_cudart.cpp.
     fake_cuda_last_misuse() says what the latest one was. */
  uint64_t misuse;
  uint64_t device_count_calls; /* cudaGetDeviceCount */
} FakeCudaStats;

/* Counters, knobs and injected failures back to their defaults (live objects are kept). */
void fake_cuda_reset(void);
void fake_cuda_set_free_memory(size_t bytes);
void fake_cuda_set_device_count(int count);
/* Nonzero: every cudaHostRegister fails. */
void fake_cuda_set_register_fails(int fails);
/* cudaHostRegister succeeds `successes` more times, then fails; negative: no limit. */
void fake_cuda_set_register_limit(int successes);
/* How long each copy waits on its stream before it runs (default 300 µs): the longer, the surer a
   buffer reused before its copy completed is caught. */
void fake_cuda_set_copy_delay_us(unsigned microseconds);
/* Nonzero: copies wait on their streams, as pending, until called again with zero (or a reset). */
void fake_cuda_hold_copies(int hold);
/* The call to `function` (e.g. "cudaMemcpyAsync") after `skip` successful ones returns `error`. */
void fake_cuda_fail_call(const char* function, int error, unsigned skip);
FakeCudaStats fake_cuda_stats(void);
const char* fake_cuda_last_misuse(void);

/* Entry points of the fake for tests that drive CUDA themselves (the signatures of
   cuda_runtime_api.h with int errors and void* handles). */
int cudaSetDevice(int device);
int cudaGetDevice(int* device);
int cudaMalloc(void** pointer, size_t size);
int cudaFree(void* pointer);
int cudaHostAlloc(void** pointer, size_t size, unsigned flags);
int cudaFreeHost(void* pointer);
int cudaHostRegister(void* pointer, size_t size, unsigned flags);
int cudaHostUnregister(void* pointer);
int cudaMemcpyAsync(void* to, const void* from, size_t size, int kind, void* stream);
int cudaStreamCreateWithFlags(void** stream, unsigned flags);
int cudaStreamDestroy(void* stream);
int cudaStreamSynchronize(void* stream);
int cudaEventCreateWithFlags(void** event, unsigned flags);
int cudaEventRecord(void* event, void* stream);
int cudaEventSynchronize(void* event);
int cudaEventQuery(void* event);
int cudaEventDestroy(void* event);

#ifdef __cplusplus
}
#endif
