#include "kernels/cuda_chunks.cuh"
#include "kernels/validate.cuh"
#include "kernels/warp_reduce.cuh"

namespace gpucache::detail {
namespace {

constexpr int kBlockThreads = 256;

// One row of one column: lane l takes values l, l+32, ... in order (coalesced warp loads of f32
// rows), widened to f32 as the CPU reference widens them, then the canonical tree. Valid in lane 0.
template <bool kHash>
__device__ ColumnSummary summarize_warp(const unsigned char* __restrict__ row, InputType input,
                                        std::uint64_t values, unsigned lane) {
  double sum = 0.0;
  float max_abs = 0.0f;
  std::uint64_t hash = hash_lane_init(lane);
#pragma unroll 4
  for (std::uint64_t i = lane; i < values; i += kLanes) {
    const float x = load_value(row, input, i);
    const double wide = load_wide(row, input, i);  // x, or an f64_kept row's own value
    sum += product(wide, wide);                    // rounded on its own, as the CPU does
    max_abs = fmaxf(max_abs, fabsf(x));
    if constexpr (kHash) hash = hash_step(hash, float_bits(x));
  }
  ColumnSummary summary;
  summary.sum_squares = warp_sum(sum);
  summary.max_abs = warp_max(max_abs);
  summary.padding = 0;
  summary.hash = kHash ? hash_finish(warp_hash(hash), values) : 0;
  return summary;
}

// One warp per row, grid-stride over rows; lane 0 writes the summary.
template <bool kHash>
__global__ void __launch_bounds__(kBlockThreads)
    summarize_rows_kernel(SummaryParams params, const unsigned char* __restrict__ rows,
                          std::uint64_t count, ColumnSummary* __restrict__ out) {
  const unsigned lane = threadIdx.x % kLanes;
  const std::uint64_t warps = static_cast<std::uint64_t>(gridDim.x) * blockDim.x / kLanes;
  const std::uint64_t pitch = params.values * input_size(params.input);
  for (std::uint64_t row =
           (static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes;
       row < count; row += warps) {
    const ColumnSummary summary =
        summarize_warp<kHash>(rows + row * pitch, params.input, params.values, lane);
    if (lane == 0) out[row] = summary;
  }
}

__global__ void __launch_bounds__(kBlockThreads)
    dot_rows_kernel(DotParams params, const unsigned char* __restrict__ a,
                    const unsigned char* __restrict__ b, std::uint64_t count,
                    double* __restrict__ out) {
  const unsigned lane = threadIdx.x % kLanes;
  const std::uint64_t warps = static_cast<std::uint64_t>(gridDim.x) * blockDim.x / kLanes;
  const std::uint64_t a_pitch = params.values * input_size(params.a);
  const std::uint64_t b_pitch = params.values * input_size(params.b);
  for (std::uint64_t row =
           (static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes;
       row < count; row += warps) {
    double sum = 0.0;
#pragma unroll 4
    for (std::uint64_t i = lane; i < params.values; i += kLanes)
      sum += product(load_wide(a + row * a_pitch, params.a, i),
                     load_wide(b + row * b_pitch, params.b, i));  // rounded on its own
    sum = warp_sum(sum);
    if (lane == 0) out[row] = sum;
  }
}

}  // namespace

void cuda_summarize_rows(CudaStaging& staging, const SummaryParams& params, const std::byte* rows,
                         const std::byte* device_rows, std::uint64_t count, ColumnSummary* out) {
  const ChunkInput inputs[1] = {{rows, device_rows, params.values * input_size(params.input)}};
  stream_rows(staging, inputs, 1, count, reinterpret_cast<std::byte*>(out), sizeof(ColumnSummary),
              [&](cudaStream_t stream, const std::byte* const* device_inputs, std::byte* device_out,
                  std::uint64_t, std::uint64_t chunk_rows) {
                const auto* chunk = reinterpret_cast<const unsigned char*>(device_inputs[0]);
                auto* summaries = reinterpret_cast<ColumnSummary*>(device_out);
                const unsigned blocks =
                    warp_per_row_blocks(chunk_rows, kBlockThreads, staging.sm_count);
                if (params.hash)
                  summarize_rows_kernel<true>
                      <<<blocks, kBlockThreads, 0, stream>>>(params, chunk, chunk_rows, summaries);
                else
                  summarize_rows_kernel<false>
                      <<<blocks, kBlockThreads, 0, stream>>>(params, chunk, chunk_rows, summaries);
              });
}

void cuda_dot_rows(CudaStaging& staging, const DotParams& params, const std::byte* a,
                   const std::byte* device_a, const std::byte* b, const std::byte* device_b,
                   std::uint64_t count, double* out) {
  const ChunkInput inputs[2] = {{a, device_a, params.values * input_size(params.a)},
                                {b, device_b, params.values * input_size(params.b)}};
  stream_rows(staging, inputs, 2, count, reinterpret_cast<std::byte*>(out), sizeof(double),
              [&](cudaStream_t stream, const std::byte* const* device_inputs, std::byte* device_out,
                  std::uint64_t, std::uint64_t chunk_rows) {
                const unsigned blocks =
                    warp_per_row_blocks(chunk_rows, kBlockThreads, staging.sm_count);
                dot_rows_kernel<<<blocks, kBlockThreads, 0, stream>>>(
                    params, reinterpret_cast<const unsigned char*>(device_inputs[0]),
                    reinterpret_cast<const unsigned char*>(device_inputs[1]), chunk_rows,
                    reinterpret_cast<double*>(device_out));
              });
}

}  // namespace gpucache::detail
