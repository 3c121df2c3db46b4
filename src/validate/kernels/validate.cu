#include "kernels/cuda_chunks.cuh"
#include "kernels/validate.cuh"
#include "kernels/warp_reduce.cuh"

namespace gpucache::detail {
namespace {

constexpr int kBlockThreads = 256;

// One column of one row: lane l takes elements l, l+32, ... in order (coalesced 128-byte warp
// loads), then the canonical tree. Valid in lane 0.
template <bool kHash>
__device__ ColumnSummary summarize_warp(const float* __restrict__ row, std::uint64_t dim,
                                        unsigned lane) {
  double sum = 0.0;
  float max_abs = 0.0f;
  std::uint64_t hash = hash_lane_init(lane);
#pragma unroll 4
  for (std::uint64_t i = lane; i < dim; i += kLanes) {
    const float x = row[i];
    const double wide = x;
    sum += wide * wide;
    max_abs = fmaxf(max_abs, fabsf(x));
    if constexpr (kHash) hash = hash_step(hash, float_bits(x));
  }
  ColumnSummary summary;
  summary.sum_squares = warp_sum(sum);
  summary.max_abs = warp_max(max_abs);
  summary.hash = kHash ? hash_finish(warp_hash(hash), dim) : 0;
  return summary;
}

__device__ double warp_dot(const float* __restrict__ a, const float* __restrict__ b,
                           std::uint64_t dim, unsigned lane) {
  double sum = 0.0;
#pragma unroll 4
  for (std::uint64_t i = lane; i < dim; i += kLanes)
    sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);  // exact product
  return warp_sum(sum);
}

// One warp per row, grid-stride over rows; lane 0 applies the shared verdict.
template <bool kHash>
__global__ void __launch_bounds__(kBlockThreads)
    check_rows_kernel(CheckParams params, const float* __restrict__ column0,
                      const float* __restrict__ column1, std::uint64_t rows,
                      RowRecord* __restrict__ out) {
  const unsigned lane = threadIdx.x % kLanes;
  const std::uint64_t warps = static_cast<std::uint64_t>(gridDim.x) * blockDim.x / kLanes;
  for (std::uint64_t row =
           (static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes;
       row < rows; row += warps) {
    ColumnSummary summaries[kMaxColumns] = {};
    const float* question = column0 + row * params.dims[0];
    summaries[0] = summarize_warp<kHash>(question, params.dims[0], lane);
    const float* answer = nullptr;
    if (params.columns > 1) {
      answer = column1 + row * params.dims[1];
      summaries[1] = summarize_warp<kHash>(answer, params.dims[1], lane);
    }
    const double dot = params.pair_cos ? warp_dot(question, answer, params.dims[0], lane) : 0.0;
    if (lane == 0) out[row] = row_verdict(params, summaries, dot);
  }
}

}  // namespace

void cuda_check_rows(CudaStaging& staging, const CheckParams& params, const float* const* columns,
                     std::uint64_t rows, RowRecord* out) {
  ChunkInput inputs[kMaxChunkInputs] = {};
  for (unsigned c = 0; c < params.columns; ++c)
    inputs[c] = {reinterpret_cast<const std::byte*>(columns[c]), params.dims[c] * sizeof(float)};
  stream_rows(staging, inputs, static_cast<int>(params.columns), rows,
              reinterpret_cast<std::byte*>(out), sizeof(RowRecord),
              [&](cudaStream_t stream, const std::byte* const* device_inputs, std::byte* device_out,
                  std::uint64_t, std::uint64_t count) {
                const auto* column0 = reinterpret_cast<const float*>(device_inputs[0]);
                const auto* column1 = reinterpret_cast<const float*>(device_inputs[1]);
                auto* records = reinterpret_cast<RowRecord*>(device_out);
                const unsigned blocks = warp_per_row_blocks(count, kBlockThreads, staging.sm_count);
                if (params.dedup)
                  check_rows_kernel<true><<<blocks, kBlockThreads, 0, stream>>>(
                      params, column0, column1, count, records);
                else
                  check_rows_kernel<false><<<blocks, kBlockThreads, 0, stream>>>(
                      params, column0, column1, count, records);
              });
}

}  // namespace gpucache::detail
