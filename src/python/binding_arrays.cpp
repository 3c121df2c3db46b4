// The arrays the extension hands to Python (binding_arrays.hpp).
#include "binding_arrays.hpp"

#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/error.hpp"

namespace gpucache::python {

namespace {

// bool and the fp8 codes always travel as u8: the Python layer views them as bool or fp8, which
// older PyTorch cannot import from DLPack.
nb::dlpack::dtype wire_dtype(DType dtype, Wire wire) {
  auto make = [](gpucache::DLPackCode code, std::size_t bytes) {
    return nb::dlpack::dtype{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bytes * 8),
                             1};
  };
  using gpucache::DLPackCode;
  const gpucache::DTypeInfo* info = gpucache::dtype_info(dtype);
  if (info == nullptr || info->dlpack == DLPackCode::none || info->dlpack == DLPackCode::bool_)
    return make(DLPackCode::uint, 1);
  if (info->dlpack == DLPackCode::bfloat && wire.bf16_as_u16) return make(DLPackCode::uint, 2);
  if (info->dlpack == DLPackCode::uint && info->size > 1 && wire.unsigned_as_signed)
    return make(DLPackCode::int_, info->size);
  return make(info->dlpack, info->size);
}

}  // namespace

nb::capsule keep_alive(const std::shared_ptr<const void>& owner) {
  auto* keep = new std::shared_ptr<const void>(owner);
  return nb::capsule(keep, [](void* pointer) noexcept {
    delete static_cast<std::shared_ptr<const void>*>(pointer);
  });
}

nb::capsule owning(std::byte* memory) {
  return nb::capsule(memory,
                     [](void* pointer) noexcept { delete[] static_cast<std::byte*>(pointer); });
}

nb::ndarray<> make_array(const void* data, const std::vector<std::size_t>& shape, DType dtype,
                         nb::capsule owner, int device_type, int device_id, Wire wire) {
  return nb::ndarray<>(const_cast<void*>(data), shape.size(), shape.data(), owner, nullptr,
                       wire_dtype(dtype, wire), device_type, device_id);
}

std::vector<std::size_t> stored_shape(std::uint64_t rows, const Column& column) {
  std::vector<std::size_t> shape{static_cast<std::size_t>(rows)};
  for (std::size_t d = 0; d < column.row_shape.size(); ++d)
    shape.push_back(static_cast<std::size_t>(d + 1 < column.row_shape.size() ? column.row_shape[d]
                                                                             : column.padded_dim));
  return shape;
}

nb::ndarray<> tensor_array(const void* data, std::uint64_t rows, const Column& column,
                           const std::shared_ptr<const void>& owner, int device_type, int device_id,
                           Wire wire) {
  return make_array(data, stored_shape(rows, column), column.dtype, keep_alive(owner), device_type,
                    device_id, wire);
}

nb::object to_python(const nb::ndarray<>& array, bool numpy) {
  return numpy ? nb::cast(nb::ndarray<nb::numpy>(array)) : nb::cast(array);
}

const Column& sequence_column(const Column& column) {
  if (column.kind != gpucache::ColumnKind::sequence)
    throw gpucache::Error("", "column '" + column.name + "'", "is not a sequence column");
  return column;
}

}  // namespace gpucache::python
