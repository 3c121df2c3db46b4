// CUDA-only internals of the staging pipeline (included by .cu files): error checks, a device
// buffer, the staging layout, and stream_rows(), which overlaps the upload of chunk k+1 with the
// kernels of chunk k.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gpucache/common/cuda_watch.hpp"
#include "gpucache/common/parallel.hpp"
#include "kernels/cuda_staging.cuh"

namespace gpucache::detail {

// Throws gpucache::Error("", "CUDA", "<what>: <error text>") unless status is cudaSuccess.
void check_cuda(cudaError_t status, const char* what);

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer(std::size_t count, const char* what) {
    if (count)
      check_cuda(
          watched_call(
              what,
              [&] { return cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)); }),
          what);
  }
  ~DeviceBuffer() {
    if (data_) watched_call("cudaFree (waits for the device)", [&] { return cudaFree(data_); });
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return data_; }

 private:
  T* data_ = nullptr;
};

inline constexpr int kSlots = 2;
inline constexpr int kMaxChunkInputs = 2;
inline constexpr std::size_t kInputAlignment = 16;
// Bytes one slot stages at a time: big enough for full-speed copies, small enough that the
// pinned allocations stay modest.
inline constexpr std::size_t kChunkBytes = std::size_t{64} << 20;

struct CudaStaging {
  int device = 0;  // the device the streams and buffers are on
  int sm_count = 1;
  std::uint64_t uploaded_bytes = 0;  // host-to-device bytes of row chunks, for reports and tests
  unsigned host_threads = 1;
  cudaStream_t streams[kSlots] = {};
  cudaEvent_t done[kSlots] = {};
  std::byte* host_in[kSlots] = {};  // pinned
  std::byte* host_out[kSlots] = {};
  std::byte* device_in[kSlots] = {};
  std::byte* device_out[kSlots] = {};
  std::size_t in_capacity = 0, out_capacity = 0;  // bytes per slot
  unsigned long long* device_counters = nullptr;  // scratch for kernels that count
  struct Pending {
    std::byte* destination = nullptr;
    std::size_t bytes = 0;
  } pending[kSlots];

  // Makes each slot hold at least these many bytes (waits for in-flight work before growing).
  void reserve(std::size_t in_bytes, std::size_t out_bytes);
  // Waits for the slot's last chunk and copies its output to the caller's memory.
  void drain(int slot);
  // After an error: waits for both streams and forgets outputs not yet copied.
  void abandon() noexcept;
};

// One input of stream_rows(): its rows in host memory, and, when not null, the same rows already
// in the staging device's memory (aligned for their type), which are then read there instead of
// being uploaded.
struct ChunkInput {
  const std::byte* host;
  const std::byte* device;
  std::size_t row_bytes;
};

inline void parallel_copy(std::byte* destination, const std::byte* source, std::size_t bytes,
                          unsigned threads) {
  parallel_for(bytes, threads, std::size_t{8} << 20, [&](std::uint64_t begin, std::uint64_t end) {
    std::memcpy(destination + begin, source + begin, end - begin);
  });
}

// Streams `rows` rows through the two slots, chunk k on stream k % 2: while the GPU uploads and
// processes chunk k, the host stages chunk k+1 into the other slot's pinned buffer and enqueues
// its upload, which overlaps chunk k's kernels. Nothing waits per row: the host blocks only to
// reuse a slot and at the end. launch(stream, device_inputs, device_output, first_row, rows)
// enqueues one chunk's kernels; device_inputs[i] holds that chunk's rows of inputs[i].
// An input with device rows is not staged: device_inputs[i] points into them at the chunk's first
// row. Streams are non-blocking, so the device rows must have no GPU work pending (the caller
// synchronises whatever wrote them).
template <class Launch>
void stream_rows(CudaStaging& staging, const ChunkInput* inputs, int input_count,
                 std::uint64_t rows, std::byte* output, std::size_t out_row_bytes,
                 Launch&& launch) {
  if (rows == 0) return;
  // Chunks are sized by every input, staged or not, so rows already on the device do not make
  // the output buffers grow; only staged inputs take room in the input buffers.
  std::size_t in_row_bytes = 0, staged_row_bytes = 0;
  for (int i = 0; i < input_count; ++i) {
    in_row_bytes += inputs[i].row_bytes;
    if (!inputs[i].device) staged_row_bytes += inputs[i].row_bytes;
  }
  const std::uint64_t chunk_rows = std::min<std::uint64_t>(
      rows, std::max<std::uint64_t>(1, kChunkBytes / (in_row_bytes + out_row_bytes)));
  // Each input starts at a multiple of kInputAlignment, so kernels may load any element type.
  staging.reserve(chunk_rows * staged_row_bytes + input_count * kInputAlignment,
                  chunk_rows * out_row_bytes);
  try {
    std::uint64_t chunk = 0;
    for (std::uint64_t first = 0; first < rows; first += chunk_rows, ++chunk) {
      const int slot = static_cast<int>(chunk % kSlots);
      const std::uint64_t count = std::min(chunk_rows, rows - first);
      staging.drain(slot);
      const std::byte* device_inputs[kMaxChunkInputs] = {};
      std::size_t offset = 0;
      for (int i = 0; i < input_count; ++i) {
        if (inputs[i].device) {
          device_inputs[i] = inputs[i].device + first * inputs[i].row_bytes;
          continue;
        }
        const std::size_t bytes = count * inputs[i].row_bytes;
        parallel_copy(staging.host_in[slot] + offset, inputs[i].host + first * inputs[i].row_bytes,
                      bytes, staging.host_threads);
        device_inputs[i] = staging.device_in[slot] + offset;
        offset += (bytes + kInputAlignment - 1) / kInputAlignment * kInputAlignment;
      }
      cudaStream_t stream = staging.streams[slot];
      // The first launch of a kernel loads the module's code onto the device (lazy loading).
      CudaCallWatch watch("upload, kernels and download of validation rows %llu-%llu on stream %d",
                          static_cast<unsigned long long>(first),
                          static_cast<unsigned long long>(first + count), slot);
      if (offset) {
        check_cuda(cudaMemcpyAsync(staging.device_in[slot], staging.host_in[slot], offset,
                                   cudaMemcpyHostToDevice, stream),
                   "upload of a chunk of rows");
        staging.uploaded_bytes += offset;
      }
      launch(stream, device_inputs, staging.device_out[slot], first, count);
      check_cuda(cudaGetLastError(), "kernel launch");
      const std::size_t out_bytes = count * out_row_bytes;
      check_cuda(cudaMemcpyAsync(staging.host_out[slot], staging.device_out[slot], out_bytes,
                                 cudaMemcpyDeviceToHost, stream),
                 "download of a chunk of results");
      check_cuda(cudaEventRecord(staging.done[slot], stream), "cudaEventRecord");
      staging.pending[slot] = {output + first * out_row_bytes, out_bytes};
    }
    for (int slot = 0; slot < kSlots; ++slot) staging.drain(slot);
  } catch (...) {
    staging.abandon();
    throw;
  }
}

// Blocks for a grid-stride kernel that runs one warp per row.
inline unsigned warp_per_row_blocks(std::uint64_t rows, int block_threads, int sm_count) {
  const std::uint64_t warps_per_block = static_cast<std::uint64_t>(block_threads) / 32;
  const std::uint64_t needed = (rows + warps_per_block - 1) / warps_per_block;
  return static_cast<unsigned>(
      std::max<std::uint64_t>(1, std::min<std::uint64_t>(needed, std::uint64_t(sm_count) * 16)));
}

}  // namespace gpucache::detail
