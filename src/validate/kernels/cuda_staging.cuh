// Pinned double buffers and two streams that the CUDA check and conversion passes stream rows
// through. The declarations use no CUDA types, so plain C++ translation units may include this
// header; the layout lives in cuda_chunks.cuh (CUDA translation units only).
#pragma once

#include <cstdint>

namespace gpucache::detail {

struct CudaStaging;

// Two non-blocking streams on the current device; buffers are allocated on first use and grow.
// host_threads: threads for copying rows into pinned memory. Throws gpucache::Error. Freed with
// cuda_staging_destroy().
CudaStaging* cuda_staging_create(unsigned host_threads);
// Waits for its streams and frees everything it holds; null is ignored.
void cuda_staging_destroy(CudaStaging* staging) noexcept;
// The device the staging's streams run on (the current device when it was created).
int cuda_staging_device(const CudaStaging& staging) noexcept;
// Bytes of rows its chunks uploaded from host to device so far.
std::uint64_t cuda_staging_uploaded_bytes(const CudaStaging& staging) noexcept;

}  // namespace gpucache::detail
