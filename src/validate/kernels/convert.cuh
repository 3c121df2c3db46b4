// CUDA launcher of the conversion pass (pass 2) and of the standalone f32 -> f16/bf16
// conversion. No CUDA types: included by src/validate/compute_backend.cpp when the build has the
// CUDA backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda_staging.cuh"
#include "kernels/row_checks.cuh"

namespace gpucache::detail {

// Same contract as cpu_convert_rows(): host `in` (rows x params.dim floats) to host `out`
// (rows x params.padded_dim output elements), byte-identical to the CPU reference, with the
// same counts.
ConvertCounts cuda_convert_rows(CudaStaging& staging, const ConvertParams& params, const float* in,
                                std::uint64_t rows, std::byte* out);

}  // namespace gpucache::detail
