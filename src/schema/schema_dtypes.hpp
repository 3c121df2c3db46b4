// The float dtypes schema columns accept as embeddings and read_rows widens to f32. The fp8 codes
// are reserved in DType but not read yet.
#pragma once

#include "gpucache/dtype.hpp"

namespace gpucache::detail {

inline bool widens_to_f32(DType dtype) noexcept {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::f64;
}

}  // namespace gpucache::detail
