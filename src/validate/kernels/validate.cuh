// CUDA launchers of the check pass (pass 1): per-column summaries and the pair dot product. No
// CUDA types: included by src/validate/compute_backend.cpp when the build has the CUDA backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda_staging.cuh"
#include "kernels/row_checks.cuh"

namespace gpucache::detail {

// Same contract as cpu_summarize_rows(): `rows` is host memory holding `count` rows; the summaries
// written to `out` are byte-identical to the CPU reference's. `device_rows`, when not null, holds
// the same rows in the staging device's memory (aligned for their type): they are read there and
// `rows` is not uploaded.
void cuda_summarize_rows(CudaStaging& staging, const SummaryParams& params, const std::byte* rows,
                         const std::byte* device_rows, std::uint64_t count, ColumnSummary* out);

// Same contract as cpu_dot_rows(), with device copies of a and b as for cuda_summarize_rows().
void cuda_dot_rows(CudaStaging& staging, const DotParams& params, const std::byte* a,
                   const std::byte* device_a, const std::byte* b, const std::byte* device_b,
                   std::uint64_t count, double* out);

}  // namespace gpucache::detail
