// The object tree every input reader produces (.pt, .npy, .npz, .safetensors, JSONL): Python-like
// values with tensors that point into the input file's memory map. Schema mapping walks this tree
// to find a dataset's columns, and `gpucache probe` prints it, without touching tensor data.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "gpucache/column.hpp"
#include "gpucache/dtype.hpp"

namespace gpucache {

// Raw bytes of one tensor storage. `owner` keeps them alive: the input's MappedFile for zero-copy
// readers, or a heap buffer for data that had to be decompressed or parsed from text.
//
// A reader asked for metadata only (ReadOptions::tensor_data = false, what probe does) leaves
// compressed storages unread: `bytes` is then empty and `unread_size` the size the input
// declares. Such a tensor passes check_bounds (its shape is checked against the declared size),
// but reading its elements throws gpucache::Error instead of handing out bytes it does not have.
struct Storage {
  std::span<const std::byte> bytes;
  std::shared_ptr<const void> owner;
  std::optional<std::uint64_t> unread_size;

  bool unread() const noexcept { return unread_size.has_value(); }
  // The storage's size in bytes, read or not.
  std::uint64_t size() const noexcept { return unread_size ? *unread_size : bytes.size(); }
  static Storage not_read(std::uint64_t declared_size) {
    return Storage{{}, nullptr, declared_size};
  }
};

struct Tensor {
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements, one per dimension
  std::int64_t storage_offset = 0;    // in elements
  bool big_endian = false;            // elements are stored big-endian and need swapping
  std::shared_ptr<const Storage> storage;
  // Dates and times (numpy datetime64/timedelta64): i64 elements that mean this. The element
  // INT64_MIN is numpy's NaT, a null.
  std::optional<ColumnTime> time;

  std::uint64_t numel() const noexcept;
  std::uint64_t nbytes() const noexcept { return numel() * dtype_size(dtype); }
  // Row-major, densely packed, little-endian: the bytes can be used as they are.
  bool is_contiguous_le() const noexcept;
  // Throws gpucache::Error (naming `origin`) when a stride or offset reaches outside the storage.
  void check_bounds(const std::string& origin) const;
  // False when the reader left the storage unread (Storage::unread): only the metadata is known.
  bool has_data() const noexcept { return !storage || !storage->unread(); }
  // The elements as one row-major span, without copying. Requires is_contiguous_le(). Throws
  // gpucache::Error when the storage was not read (has_data() is false).
  std::span<const std::byte> contiguous_bytes() const;
  // Copies elements [first_element, first_element + out.size() / itemsize) in row-major order
  // into out, applying strides and byte order. check_bounds() must have passed. Throws
  // gpucache::Error when the storage was not read.
  void copy_row_major(std::uint64_t first_element, std::span<std::byte> out) const;
  // Builds a dense little-endian tensor that owns its bytes.
  static Tensor from_buffer(DType dtype, std::vector<std::int64_t> shape,
                            std::vector<std::byte> data);
};

// "[2, 384]": a shape as people read it in messages and listings.
std::string shape_text(const std::vector<std::int64_t>& shape);

struct List;
struct Dict;

struct None {};

struct Value {
  std::variant<None, bool, std::int64_t, double, std::string, std::shared_ptr<List>,
               std::shared_ptr<Dict>, std::shared_ptr<Tensor>>
      data;

  Value() = default;
  template <typename T>
  Value(T&& value)  // NOLINT(google-explicit-constructor): values are built from literals
      requires(!std::is_same_v<std::remove_cvref_t<T>, Value>)
      : data(std::forward<T>(value)) {}

  bool is_none() const noexcept { return std::holds_alternative<None>(data); }
  const std::string* as_string() const noexcept { return std::get_if<std::string>(&data); }
  const std::int64_t* as_int() const noexcept { return std::get_if<std::int64_t>(&data); }
  const double* as_float() const noexcept { return std::get_if<double>(&data); }
  const List* as_list() const noexcept;
  const Dict* as_dict() const noexcept;
  const Tensor* as_tensor() const noexcept;
  // "dict", "list", "tuple", "str", "int", "float", "bool", "None" or "tensor".
  std::string_view type_name() const noexcept;
};

struct List {
  std::vector<Value> items;
  bool is_tuple = false;
};

// Keys keep insertion order; non-string keys are stored as their decimal or repr text.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;

  // The value of the first item named `key`, or nullptr. A dict of more than a few items is
  // searched through a hash index made on the first lookup (a safetensors header may name a
  // million tensors, and callers look keys up in loops), remade when `items` has grown or moved
  // since; so items may be appended between lookups, but not renamed in place.
  const Value* find(std::string_view key) const noexcept;

  Dict() = default;
  Dict(const Dict& other) : items(other.items) {}
  Dict(Dict&& other) noexcept : items(std::move(other.items)) {}
  Dict& operator=(const Dict& other);
  Dict& operator=(Dict&& other) noexcept;

 private:
  struct Index;
  mutable std::atomic<std::shared_ptr<const Index>> index_;
};

}  // namespace gpucache
