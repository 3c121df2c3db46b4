// The .npy array header (numpy's format.py, versions 1.0, 2.0 and 3.0): magic, version, header
// length, then a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded to an aligned data start. Used for .npy files and for every member of an .npz archive.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpucache/dtype.hpp"
#include "gpucache/value.hpp"

namespace gpucache::detail {

struct NpyHeader {
  DType dtype = DType::f32;
  bool big_endian = false;  // only ever true for multi-byte dtypes
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
  std::uint64_t data_offset = 0;  // from the start of the .npy bytes
};

// Maps a numpy type kind ('f', 'i', 'u', 'b') and item size to a DType; nullopt when gpucache
// has no such type. Shared with the pickle reader, which meets numpy dtypes as 'f4', 'i8', ...
std::optional<DType> numpy_dtype(char kind, std::uint64_t itemsize) noexcept;

// Parses the header of `bytes` (a whole .npy file or member). Errors name `file` and `where`.
// Refuses object arrays ('|O'), structured and string dtypes, and headers over 1 MiB.
NpyHeader parse_npy_header(std::span<const std::byte> bytes, const std::string& file,
                           const std::string& where = "npy header");

// The array in `bytes` as a zero-copy tensor whose storage is kept alive by `owner`. Fortran-order
// arrays get column-major strides. The data must be exactly shape × itemsize bytes.
Tensor npy_tensor(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                  const std::string& file, const std::string& where = "npy header");

}  // namespace gpucache::detail
