// Dispatches the validation and conversion steps to the CPU reference or to the CUDA launchers.
// Internal to the validate module: the only place outside kernels/ that knows whether the build has
// CUDA (GPUCACHE_HAVE_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gpucache/device.hpp"
#include "gpucache/dtype.hpp"
#include "kernels/row_checks.cuh"

namespace gpucache::detail {

// The same rows as a host pointer, in CUDA device memory on device `ordinal` (ColumnBatch's
// device_rows); rows == nullptr when there is no such copy.
struct DeviceRows {
  const std::byte* rows = nullptr;
  int ordinal = -1;
};

// The kernels' output type for a float storage type (gpucache/validate.hpp's rule): what rows are
// converted to, or, for a column that is only checked (`converting` false), the type whose
// overflow the checks watch for (f64 is stored unchanged: none, as f32). Throws gpucache::Error
// naming `option` for any other type.
OutputType output_type_for(DType dtype, bool converting, const std::string& option);
// The kernels' input type for rows of a float storage type (what the checks read); nullopt for
// any other dtype.
std::optional<InputType> input_type_for(DType dtype) noexcept;

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

  // Pass 1, one column at a time: the summary of each of `count` rows lying one after the other.
  // With `device`, the CUDA backend reads the rows there when they are on its own device and
  // aligned for their type (no upload); otherwise it uploads `rows`. The CPU ignores `device`.
  void summarize_rows(const SummaryParams& params, const std::byte* rows, std::uint64_t count,
                      ColumnSummary* out, DeviceRows device = {});
  // The same for rows lying apart (rows[r]); the CPU reference only.
  void summarize_row_pointers(const SummaryParams& params, const std::byte* const* rows,
                              std::uint64_t count, ColumnSummary* out);
  // The pair's dot products, row by row.
  void dot_rows(const DotParams& params, const std::byte* a, const std::byte* b,
                std::uint64_t count, double* out, DeviceRows device_a = {},
                DeviceRows device_b = {});
  // The same for rows lying apart; the CPU reference only.
  void dot_row_pointers(const DotParams& params, const std::byte* const* a,
                        const std::byte* const* b, std::uint64_t count, double* out);
  ConvertCounts convert_rows(const ConvertParams& params, const float* in, std::uint64_t rows,
                             std::byte* out);
  // The ordering steps run on the CPU reference when the GPU lacks the memory for them; the
  // order is total, so the result is the same.
  // Sorts pairs by (key, value); values ascending on entry.
  void sort_by_key(std::uint64_t* keys, std::uint64_t* values, std::uint64_t count);
  // Bytes of rows the CUDA check pass copied from host to device so far; 0 on the CPU.
  std::uint64_t uploaded_bytes() const noexcept;
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
