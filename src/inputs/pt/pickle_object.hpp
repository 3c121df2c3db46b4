// The objects the restricted pickle machine builds before they become a gpucache::Value. Copying
// one is a plain copy (strings are views, containers pointers into the run's arena), because the
// memo hands out the same object many times.
#pragma once

#include <cstdint>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
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
// Byte strings and integers wider than 64 bits are rare; their text is kept in Context::texts.
struct Bytes {
  std::size_t text;  // index into Context::texts
};
// An integer that does not fit in 64 bits: little-endian two's complement, as in LONG1/LONG4.
struct BigInt {
  std::size_t text;  // index into Context::texts
};

enum class GlobalKind {
  ordered_dict,
  counter,
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

// A tensor the machine rebuilt; it becomes part of the result, so it is shared, not arena-made.
struct TensorHandle {
  std::size_t index;  // into Context::tensors
};

struct PyList;
struct PyDict;
struct NumpyDTypeObject;
struct NdArrayObject;

// Trivially copyable and destructible: the memo and the stack copy values millions of times for a
// dataset, and containers are plain pointers into the run's arena (below), so copying one costs
// no reference count and the objects are released with the arena, without visiting each.
using PyValue =
    std::variant<PyNone, bool, std::int64_t, BigInt, double, Str, Bytes, PyList*, PyDict*,
                 GlobalRef, StorageHandle, TensorHandle, NumpyDTypeObject*, NdArrayObject*>;
static_assert(std::is_trivially_copyable_v<PyValue> && std::is_trivially_destructible_v<PyValue>);

// Mutable objects become frozen once they are placed inside another container: the pickles
// CPython writes always fill a container before nesting it, and refusing later changes rules out
// reference cycles and keeps every container's recorded depth exact. Eight bytes, the last two
// free for a derived type's flag (is_tuple, ordered): a dataset makes millions of these.
struct Mutable {
  std::uint32_t depth = 1;  // at most PickleLimits::max_depth, itself capped below 2^32
  bool frozen = false;
  // Times placed inside a container, up to 2: an object placed once appears once in the tree, so
  // converting it needs no record for sharing.
  std::uint8_t placements = 0;
};

// Lists, tuples, dicts and numpy objects, their items and their indexes come from one arena per
// run (ObjectArena in pickle.cpp): a pickle of a dataset makes several per row (every tensor's
// argument tuples), the memo keeps nearly all of them alive to the end anyway, and taking memory
// from an arena and releasing it all at once costs a fraction of allocating and freeing each
// block. Their destructors never run, so they hold nothing but arena memory and plain values.
using Arena = std::pmr::memory_resource;

struct PyList : Mutable {
  explicit PyList(Arena* arena) : items(arena) {}
  bool is_tuple = false;
  std::pmr::vector<PyValue> items;
};

using DictIndex = std::pmr::unordered_map<std::string_view, std::size_t>;

struct PyDict : Mutable {
  explicit PyDict(Arena* arena) : items(arena) {}
  bool ordered = false;
  // Keys as text: str keys view the pickle, the repr of other keys lives in the arena.
  std::pmr::vector<std::pair<std::string_view, PyValue>> items;
  DictIndex* index = nullptr;  // made in the arena once a dict has 32 keys
};

// numpy.dtype('f4', False, True) before and after its BUILD(state) sets the byte order.
struct NumpyDTypeObject : Mutable {
  explicit NumpyDTypeObject(Arena*) {}
  std::string_view code;  // "f4", viewing the pickle
  DType dtype = DType::f32;
  bool big_endian = false;
  bool built = false;
};

// numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b'b'): an empty array that
// BUILD(state) fills with shape, dtype, order and data.
struct NdArrayObject : Mutable {
  explicit NdArrayObject(Arena*) {}
  std::optional<TensorHandle> tensor;  // empty until built
};

// A new object of one of the types above, made in `arena` and never destroyed.
template <typename Object>
Object* make_object(Arena* arena) {
  return ::new (arena->allocate(sizeof(Object), alignof(Object))) Object(arena);
}

std::string_view kind_name(const PyValue& value) noexcept;

}  // namespace gpucache::detail::pickle
