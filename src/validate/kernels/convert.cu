#include <type_traits>

#include "kernels/convert.cuh"
#include "kernels/cuda_chunks.cuh"
#include "kernels/warp_reduce.cuh"

namespace gpucache::detail {
namespace {

constexpr int kBlockThreads = 256;
enum Counter { kOverflowed = 0, kFlushed = 1, kFirstOverflowRow = 2 };

// One warp per row: the optional canonical norm (broadcast from lane 0), then each lane
// converts elements lane, lane+32, ... and writes zeros past dim up to the row pitch.
template <OutputType kOutput>
__global__ void __launch_bounds__(kBlockThreads)
    convert_rows_kernel(ConvertParams params, const float* __restrict__ in, std::uint64_t rows,
                        std::uint64_t first_row, std::byte* __restrict__ out,
                        unsigned long long* counters) {
  using Element = std::conditional_t<kOutput == OutputType::f32, float, std::uint16_t>;
  const unsigned lane = threadIdx.x % kLanes;
  const std::uint64_t warps = static_cast<std::uint64_t>(gridDim.x) * blockDim.x / kLanes;
  const std::uint64_t dim = params.dim, padded_dim = params.padded_dim;
  std::uint32_t overflowed = 0, flushed = 0;
  for (std::uint64_t row =
           (static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes;
       row < rows; row += warps) {
    const float* source = in + row * dim;
    Element* destination = reinterpret_cast<Element*>(out) + row * padded_dim;
    double norm = 0.0;
    bool scale = false;
    if (params.normalize) {
      norm = norm_of(__shfl_sync(kFullWarp, warp_sum_squares(source, dim, lane), 0));
      scale = normalizable(norm);
    }
    const std::uint32_t overflowed_before = overflowed;
    for (std::uint64_t i = lane; i < padded_dim; i += kLanes) {
      if (i >= dim) {
        destination[i] = Element{0};
        continue;
      }
      const float x = scale ? normalize_value(source[i], norm) : source[i];
      if constexpr (kOutput == OutputType::f32)
        destination[i] = x;
      else
        destination[i] = convert_element(x, kOutput, params.on_overflow, overflowed, flushed);
    }
    if (__any_sync(kFullWarp, overflowed != overflowed_before) && lane == 0)
      atomicMin(&counters[kFirstOverflowRow], static_cast<unsigned long long>(first_row + row));
  }
  const unsigned long long warp_overflowed = warp_count(overflowed);
  const unsigned long long warp_flushed = warp_count(flushed);
  if (lane == 0 && (warp_overflowed | warp_flushed)) {
    atomicAdd(&counters[kOverflowed], warp_overflowed);
    atomicAdd(&counters[kFlushed], warp_flushed);
  }
}

template <OutputType kOutput>
void launch(CudaStaging& staging, const ConvertParams& params, cudaStream_t stream, const float* in,
            std::uint64_t rows, std::uint64_t first_row, std::byte* out) {
  const unsigned blocks = warp_per_row_blocks(rows, kBlockThreads, staging.sm_count);
  convert_rows_kernel<kOutput><<<blocks, kBlockThreads, 0, stream>>>(params, in, rows, first_row,
                                                                     out, staging.device_counters);
}

}  // namespace

ConvertCounts cuda_convert_rows(CudaStaging& staging, const ConvertParams& params, const float* in,
                                std::uint64_t rows, std::byte* out) {
  const std::size_t element_size = params.output == OutputType::f32 ? 4 : 2;
  // Counters start at {0, 0, no row}; both streams' kernels add to them.
  const unsigned long long initial[3] = {0, 0, ~0ULL};
  unsigned long long final_counts[3] = {};
  check_cuda(cudaMemcpyAsync(staging.device_counters, initial, sizeof initial,
                             cudaMemcpyHostToDevice, staging.streams[0]),
             "cudaMemcpyAsync (counters)");
  check_cuda(watched_call("cudaStreamSynchronize (conversion counters set)",
                          [&] { return cudaStreamSynchronize(staging.streams[0]); }),
             "cudaStreamSynchronize");
  const ChunkInput input{reinterpret_cast<const std::byte*>(in), nullptr,
                         params.dim * sizeof(float)};
  stream_rows(
      staging, &input, 1, rows, out, params.padded_dim * element_size,
      [&](cudaStream_t stream, const std::byte* const* device_inputs, std::byte* device_out,
          std::uint64_t first, std::uint64_t count) {
        const auto* chunk = reinterpret_cast<const float*>(device_inputs[0]);
        switch (params.output) {
          case OutputType::f32:
            launch<OutputType::f32>(staging, params, stream, chunk, count, first, device_out);
            break;
          case OutputType::f16:
            launch<OutputType::f16>(staging, params, stream, chunk, count, first, device_out);
            break;
          case OutputType::bf16:
            launch<OutputType::bf16>(staging, params, stream, chunk, count, first, device_out);
            break;
        }
      });
  // stream_rows waited for every chunk, so the counters are final.
  check_cuda(cudaMemcpyAsync(final_counts, staging.device_counters, sizeof final_counts,
                             cudaMemcpyDeviceToHost, staging.streams[0]),
             "cudaMemcpyAsync (counters)");
  check_cuda(watched_call("cudaStreamSynchronize (conversion counters read)",
                          [&] { return cudaStreamSynchronize(staging.streams[0]); }),
             "cudaStreamSynchronize");
  ConvertCounts counts;
  counts.overflowed = final_counts[kOverflowed];
  counts.flushed = final_counts[kFlushed];
  counts.first_overflow_row = final_counts[kFirstOverflowRow];
  return counts;
}

}  // namespace gpucache::detail
