// Where the bytes of a copying load go. A source (sources.hpp) hands each run of bytes it has read
// to Destination::write; the destination decides how they move: cudaMemcpyAsync on its own CUDA
// stream (destination_device.hpp) or a CPU copy (destination_pinned_host.hpp). Dataset::to_host
// needs no destination: its tensors are views of the mappings themselves (host_load.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cuda_api.hpp"

namespace gpucache::runtime::detail {

class Destination {
 public:
  virtual ~Destination() = default;

  // The stream write() enqueues its copies on, or nullptr when write() copies with the CPU and is
  // done when it returns. With a stream, the memory a source passes to write() must be pinned
  // (registered or cudaHostAlloc'd), and must neither change nor go away before the copy has run:
  // sources fence it with an event recorded on this stream.
  virtual cuda_stream_t stream() const noexcept = 0;
  // Copies `bytes` bytes from `from` to byte `offset` of the destination. Callable from several
  // threads at once. Errors name `path`, the file the bytes came from.
  virtual void write(std::uint64_t offset, const std::byte* from, std::uint64_t bytes,
                     const std::string& path) = 0;
  // Blocks until every write has landed.
  virtual void finish() = 0;
};

// A destination that is one allocation, which the loaded data keeps: the two placements.
class AllocationDestination : public Destination {
 public:
  // Byte 0 of the allocation as CUDA kernels address it (nullptr for an empty allocation).
  virtual std::byte* device_base() const noexcept = 0;
  // Keeps the allocation alive; it is released when the last holder goes.
  virtual std::shared_ptr<const void> memory() const noexcept = 0;
};

// Memory from cudaMalloc or cudaHostAlloc, handed over to be released by `release` (&CudaApi::free
// or &CudaApi::free_host) with its device current, whichever device is current when it goes.
class CudaAllocation {
 public:
  using Release = cuda_error_t (*CudaApi::*)(void*);
  CudaAllocation(const CudaApi& cuda, int device, void* pointer, Release release) noexcept
      : cuda_(cuda), device_(device), pointer_(pointer), release_(release) {}
  ~CudaAllocation();
  CudaAllocation(const CudaAllocation&) = delete;
  CudaAllocation& operator=(const CudaAllocation&) = delete;
  std::byte* data() const noexcept { return static_cast<std::byte*>(pointer_); }

 private:
  const CudaApi& cuda_;
  int device_;
  void* pointer_;
  Release release_;
};

// "1.50": a size in GiB for messages; small ones keep three significant digits, not "0.00".
std::string gib(std::uint64_t bytes);

}  // namespace gpucache::runtime::detail
