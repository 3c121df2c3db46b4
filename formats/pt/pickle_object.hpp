// The objects the restricted pickle machine builds before they become a gpucache::Value. Copying
// one is cheap (strings and containers are shared), because the memo hands out the same object
// many times.
#pragma once

#include <cstdint>
#include <memory>
#include <memory_resource>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "gpucache/dtype.hpp"
#include "gpucache/value.hpp"

namespace gpucache::detail::pickle {

using Text = std::shared_ptr<const std::string>;

struct PyNone {};
struct Str {
  // UTF-8, viewed in the pickle's own bytes: they outlive every object the machine makes, and
  // copying each of a dataset's strings here would cost an allocation per row or two.
  std::string_view text;
};
struct Bytes {
  Text data;
};
// An integer that does not fit in 64 bits: little-endian two's complement, as in LONG1/LONG4.
struct BigInt {
  Text le_bytes;
};

enum class GlobalKind {
  ordered_dict,
  torch_size,
  rebuild_tensor,
  rebuild_tensor_v2,
  rebuild_tensor_v3,
  rebuild_parameter,
  rebuild_parameter_with_state,
  parameter,
  storage_type,
  untyped_storage,
  torch_dtype,
  codecs_encode,
  numpy_reconstruct,
  numpy_ndarray,
  numpy_dtype,
  numpy_scalar,
  numpy_frombuffer,
};

struct AllowedGlobal {
  std::string_view module;
  std::string_view name;
  GlobalKind kind;
  DType dtype;  // for storage types and torch dtypes
};

struct GlobalRef {
  const AllowedGlobal* entry;
};

struct StorageHandle {
  std::size_t index;  // into PickleResult::storages
};

struct PyList;
struct PyDict;
struct NumpyDTypeObject;
struct NdArrayObject;

using PyValue =
    std::variant<PyNone, bool, std::int64_t, BigInt, double, Str, Bytes, std::shared_ptr<PyList>,
                 std::shared_ptr<PyDict>, GlobalRef, StorageHandle, std::shared_ptr<Tensor>,
                 std::shared_ptr<NumpyDTypeObject>, std::shared_ptr<NdArrayObject>>;

// Mutable objects become frozen once they are placed inside another container: the pickles
// CPython writes always fill a container before nesting it, and refusing later changes rules out
// reference cycles and keeps every container's recorded depth exact.
struct Mutable {
  bool frozen = false;
  // Times placed inside a container, up to 2: an object placed once appears once in the tree, so
  // converting it needs no record for sharing.
  std::uint8_t placements = 0;
  std::uint64_t depth = 1;
};

// Lists, tuples and dicts, and their items, come from one arena per run (ObjectArena in
// pickle.cpp): a pickle of a dataset makes several per row (every tensor's argument tuples), the
// memo keeps nearly all of them alive to the end anyway, and taking memory from an arena and
// releasing it all at once costs a fraction of allocating and freeing each block.
using Arena = std::pmr::memory_resource;

struct PyList : Mutable {
  explicit PyList(Arena* arena) : items(arena) {}
  std::pmr::vector<PyValue> items;
  bool is_tuple = false;
};

struct PyDict : Mutable {
  explicit PyDict(Arena* arena) : items(arena) {}
  std::pmr::vector<std::pair<std::pmr::string, PyValue>> items;  // keys already as text
  std::unordered_map<std::string, std::size_t> index;  // built for dicts of 32 keys or more
  bool ordered = false;
};

// A list, tuple or dict whose object, items and keys live in `arena`.
template <typename Object>
std::shared_ptr<Object> make_object(Arena* arena) {
  return std::allocate_shared<Object>(std::pmr::polymorphic_allocator<Object>(arena), arena);
}

// numpy.dtype('f4', False, True) before and after its BUILD(state) sets the byte order.
struct NumpyDTypeObject : Mutable {
  std::string code;  // "f4"
  DType dtype = DType::f32;
  bool big_endian = false;
  bool built = false;
};

// numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b'b'): an empty array that
// BUILD(state) fills with shape, dtype, order and data.
struct NdArrayObject : Mutable {
  std::shared_ptr<Tensor> tensor;  // null until built
};

std::string_view kind_name(const PyValue& value) noexcept;

}  // namespace gpucache::detail::pickle
