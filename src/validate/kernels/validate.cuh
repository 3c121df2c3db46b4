// CUDA launcher of the check pass (pass 1). No CUDA types: included by src/validate/compute_backend.cpp when the build
// has the CUDA backend.
#pragma once

#include <cstdint>

#include "kernels/cuda_staging.cuh"
#include "kernels/row_checks.cuh"

namespace gpucache::detail {

// Same contract as cpu_check_rows(): columns[c] are host pointers to rows x params.dims[c]
// floats; the records written to `out` are byte-identical to the CPU reference's.
void cuda_check_rows(CudaStaging& staging, const CheckParams& params, const float* const* columns,
                     std::uint64_t rows, RowRecord* out);

}  // namespace gpucache::detail
