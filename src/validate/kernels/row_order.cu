#include <thrust/iterator/counting_iterator.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>

#include "kernels/cuda_chunks.cuh"
#include "kernels/row_checks.cuh"
#include "kernels/row_order.cuh"

namespace gpucache::detail {
namespace {

__global__ void row_keys_kernel(const std::uint64_t* __restrict__ rows, std::uint64_t count,
                                std::uint64_t seed, std::uint64_t purpose,
                                std::uint64_t* __restrict__ keys) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride)
    keys[i] = row_key(seed, purpose, rows[i]);
}

// Sorts device pairs; the sorted values end up in values_out.
void radix_sort_pairs(const std::uint64_t* keys_in, std::uint64_t* keys_out,
                      const std::uint64_t* values_in, std::uint64_t* values_out,
                      std::uint64_t count) {
  std::size_t temp_bytes = 0;
  check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in, keys_out, values_in,
                                             values_out, count),
             "cub::DeviceRadixSort::SortPairs");
  DeviceBuffer<std::byte> temp(std::max<std::size_t>(temp_bytes, 1), "cudaMalloc (sort scratch)");
  check_cuda(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys_in, keys_out, values_in,
                                             values_out, count),
             "cub::DeviceRadixSort::SortPairs");
}

// Whether `bytes` of scratch (plus the sort's own, about as much again) fit in free memory.
bool device_memory_fits(std::size_t bytes) {
  std::size_t free_bytes = 0, total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  return bytes + bytes / 2 + (std::size_t{64} << 20) < free_bytes;
}

}  // namespace

bool cuda_sort_by_key(std::uint64_t* keys, std::uint64_t* values, std::uint64_t count) {
  if (count < 2) return true;
  // Synchronous copies and CUB's sort on the legacy default stream, which also waits for the work
  // of every blocking stream of the process (PyTorch's default stream among them).
  CudaCallWatch watch("the sort of %llu keys on the GPU (cudaMemcpy, cub::DeviceRadixSort)",
                      static_cast<unsigned long long>(count));
  if (!device_memory_fits(count * 4 * sizeof(std::uint64_t))) return false;
  const std::size_t bytes = count * sizeof(std::uint64_t);
  DeviceBuffer<std::uint64_t> keys_in(count, "cudaMalloc (keys)"),
      keys_out(count, "cudaMalloc (keys)"), values_in(count, "cudaMalloc (values)"),
      values_out(count, "cudaMalloc (values)");
  check_cuda(cudaMemcpy(keys_in.get(), keys, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (keys)");
  check_cuda(cudaMemcpy(values_in.get(), values, bytes, cudaMemcpyHostToDevice),
             "cudaMemcpy (values)");
  radix_sort_pairs(keys_in.get(), keys_out.get(), values_in.get(), values_out.get(), count);
  check_cuda(cudaMemcpy(keys, keys_out.get(), bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (keys)");
  check_cuda(cudaMemcpy(values, values_out.get(), bytes, cudaMemcpyDeviceToHost),
             "cudaMemcpy (values)");
  return true;
}

bool cuda_order_selected_rows(const std::uint8_t* selected, std::uint64_t count, bool by_key,
                              std::uint64_t seed, std::uint64_t purpose, std::uint64_t* out,
                              std::uint64_t* written) {
  *written = 0;
  if (count == 0) return true;
  // As cuda_sort_by_key: synchronous calls on the legacy default stream.
  CudaCallWatch watch("the selection of %llu rows on the GPU (cudaMemcpy, cub::DeviceSelect)",
                      static_cast<unsigned long long>(count));
  if (!device_memory_fits(count * (1 + 4 * sizeof(std::uint64_t)))) return false;
  DeviceBuffer<std::uint8_t> flags(count, "cudaMalloc (row flags)");
  DeviceBuffer<std::uint64_t> rows(count, "cudaMalloc (rows)");
  DeviceBuffer<std::int64_t> selected_count(1, "cudaMalloc (count)");
  check_cuda(cudaMemcpy(flags.get(), selected, count, cudaMemcpyHostToDevice),
             "cudaMemcpy (row flags)");
  const thrust::counting_iterator<std::uint64_t> all_rows(0);
  std::size_t temp_bytes = 0;
  check_cuda(cub::DeviceSelect::Flagged(nullptr, temp_bytes, all_rows, flags.get(), rows.get(),
                                        selected_count.get(), static_cast<std::int64_t>(count)),
             "cub::DeviceSelect::Flagged");
  {
    DeviceBuffer<std::byte> temp(std::max<std::size_t>(temp_bytes, 1),
                                 "cudaMalloc (select scratch)");
    check_cuda(cub::DeviceSelect::Flagged(temp.get(), temp_bytes, all_rows, flags.get(), rows.get(),
                                          selected_count.get(), static_cast<std::int64_t>(count)),
               "cub::DeviceSelect::Flagged");
  }
  std::int64_t kept = 0;
  check_cuda(cudaMemcpy(&kept, selected_count.get(), sizeof kept, cudaMemcpyDeviceToHost),
             "cudaMemcpy (count)");
  const auto kept_rows = static_cast<std::uint64_t>(kept);
  const std::size_t bytes = kept_rows * sizeof(std::uint64_t);
  if (!by_key || kept_rows < 2) {
    if (kept_rows)
      check_cuda(cudaMemcpy(out, rows.get(), bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (rows)");
    *written = kept_rows;
    return true;
  }
  DeviceBuffer<std::uint64_t> keys(kept_rows, "cudaMalloc (keys)"),
      keys_sorted(kept_rows, "cudaMalloc (keys)"), rows_sorted(kept_rows, "cudaMalloc (rows)");
  const unsigned blocks =
      static_cast<unsigned>(std::min<std::uint64_t>((kept_rows + 255) / 256, 65535));
  row_keys_kernel<<<blocks, 256>>>(rows.get(), kept_rows, seed, purpose, keys.get());
  check_cuda(cudaGetLastError(), "row key kernel launch");
  radix_sort_pairs(keys.get(), keys_sorted.get(), rows.get(), rows_sorted.get(), kept_rows);
  check_cuda(cudaMemcpy(out, rows_sorted.get(), bytes, cudaMemcpyDeviceToHost),
             "cudaMemcpy (rows)");
  *written = kept_rows;
  return true;
}

}  // namespace gpucache::detail
