// Knobs and counters of the fake CUDA runtime (fake_cudart.cpp) used by test_runtime_device.cpp.
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
} FakeCudaStats;

void fake_cuda_reset(void);
void fake_cuda_set_free_memory(size_t bytes);
void fake_cuda_set_device_count(int count);
void fake_cuda_set_register_fails(int fails);
FakeCudaStats fake_cuda_stats(void);

/* Two of the fake's CUDA entry points, for tests that check the runtime leaves them as found. */
int cudaSetDevice(int device);
int cudaGetDevice(int* device);

#ifdef __cplusplus
}
#endif
