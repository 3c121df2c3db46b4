// The arrays the extension hands to Python (binding_arrays.cpp): DLPack-capable nanobind ndarrays
// over the runtime's memory, whose owner capsule keeps a mapping or device allocation alive exactly
// as long as the last tensor made from it. Shared by the dataset and stream bindings.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpucache/column.hpp"
#include "gpucache/dtype.hpp"

namespace gpucache::python {

namespace nb = nanobind;

// How element types travel over DLPack, for consumers that lack some of them.
struct Wire {
  bool bf16_as_u16 = false;         // numpy has no bfloat16
  bool unsigned_as_signed = false;  // PyTorch before 2.3 has no uint16/32/64: same bits, signed
};

// A capsule that keeps `owner` (a mapping or device allocation) alive while an array uses it.
nb::capsule keep_alive(const std::shared_ptr<const void>& owner);

// A capsule owning memory this module allocated (arrays computed here, not views).
nb::capsule owning(std::byte* memory);

nb::ndarray<> make_array(const void* data, const std::vector<std::size_t>& shape, DType dtype,
                         nb::capsule owner, int device_type, int device_id, Wire wire);

// The stored shape of a tensor column's rows: [rows, *row_shape] with the innermost dimension
// padded_dim ([rows] for one value per row).
std::vector<std::size_t> stored_shape(std::uint64_t rows, const Column& column);

// A tensor column's stored rows over `data`, kept alive by `owner`.
nb::ndarray<> tensor_array(const void* data, std::uint64_t rows, const Column& column,
                           const std::shared_ptr<const void>& owner, int device_type, int device_id,
                           Wire wire);

// numpy gets its own arrays; others a DLPack-capable array (torch.utils.dlpack.from_dlpack).
nb::object to_python(const nb::ndarray<>& array, bool numpy);

// `column`, or an error naming it when it is not a sequence column.
const Column& sequence_column(const Column& column);

}  // namespace gpucache::python
