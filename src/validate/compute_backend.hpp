// Dispatches the validation and conversion steps to the CPU reference or to the CUDA launchers.
// Internal to the validate module: the only place outside kernels/ that knows whether the build has
// CUDA (GPUCACHE_HAVE_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gpucache/device.hpp"
#include "kernels/row_checks.cuh"

namespace gpucache::detail {

class ComputeBackend {
 public:
  // Resolves `requested` with resolve_device(); throws gpucache::Error when cuda is requested
  // but not usable. threads: CPU threads (0 = all).
  ComputeBackend(Device requested, unsigned threads);
  ~ComputeBackend();
  ComputeBackend(ComputeBackend&&) noexcept;
  ComputeBackend& operator=(ComputeBackend&&) noexcept;

  Device device() const noexcept { return device_; }
  const std::string& description() const noexcept { return description_; }
  unsigned threads() const noexcept { return threads_; }

  void check_rows(const CheckParams& params, const float* const* columns, std::uint64_t rows,
                  RowRecord* out);
  // The same for rows lying apart (rows[c][r]); the CPU reference only.
  void check_row_pointers(const CheckParams& params, const float* const* const* rows,
                          std::uint64_t count, RowRecord* out);
  ConvertCounts convert_rows(const ConvertParams& params, const float* in, std::uint64_t rows,
                             std::byte* out);
  // The ordering steps run on the CPU reference when the GPU lacks the memory for them; the
  // order is total, so the result is the same.
  // Sorts pairs by (key, value); values ascending on entry.
  void sort_by_key(std::uint64_t* keys, std::uint64_t* values, std::uint64_t count);
  std::uint64_t order_selected_rows(const std::uint8_t* selected, std::uint64_t count, bool by_key,
                                    std::uint64_t seed, std::uint64_t purpose, std::uint64_t* out);

 private:
  struct Cuda;  // staging buffers, created on first use
  Device device_ = Device::cpu;
  std::string description_;
  unsigned threads_ = 1;
  std::unique_ptr<Cuda> cuda_;
};

}  // namespace gpucache::detail
