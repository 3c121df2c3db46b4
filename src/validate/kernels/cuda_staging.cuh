// Pinned double buffers and two streams that the CUDA check and conversion passes stream rows
// through. The declarations use no CUDA types, so plain C++ translation units may include this
// header; the layout lives in cuda_chunks.cuh (CUDA translation units only).
#pragma once

#include <cstdint>
#include <memory>

namespace gpucache::detail {

struct CudaStaging;
struct CudaStagingDeleter {
  void operator()(CudaStaging* staging) const noexcept;
};
using CudaStagingPtr = std::unique_ptr<CudaStaging, CudaStagingDeleter>;

// Two non-blocking streams on the current device; buffers are allocated on first use and grow.
// host_threads: threads for copying rows into pinned memory. Throws gpucache::Error.
CudaStagingPtr cuda_staging_create(unsigned host_threads);
// The device the staging's streams run on (the current device when it was created).
int cuda_staging_device(const CudaStaging& staging) noexcept;
// Bytes of rows its chunks uploaded from host to device so far.
std::uint64_t cuda_staging_uploaded_bytes(const CudaStaging& staging) noexcept;

}  // namespace gpucache::detail
