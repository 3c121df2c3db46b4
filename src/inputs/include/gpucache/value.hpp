// The object tree every input reader produces (.pt, .npy, .npz, .safetensors, JSONL): Python-like
// values with tensors that point into the input file's memory map. Schema mapping walks this tree
// to find a dataset's columns, and `gpucache probe` prints it, without touching tensor data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "gpucache/dtype.hpp"

namespace gpucache {

// Raw bytes of one tensor storage. `owner` keeps them alive: the input's MappedFile for zero-copy
// readers, or a heap buffer for data that had to be decompressed or parsed from text.
struct Storage {
  std::span<const std::byte> bytes;
  std::shared_ptr<const void> owner;
};

struct Tensor {
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements, one per dimension
  std::int64_t storage_offset = 0;    // in elements
  bool big_endian = false;            // elements are stored big-endian and need swapping
  std::shared_ptr<const Storage> storage;

  std::uint64_t numel() const noexcept;
  std::uint64_t nbytes() const noexcept { return numel() * dtype_size(dtype); }
  // Row-major, densely packed, little-endian: the bytes can be used as they are.
  bool is_contiguous_le() const noexcept;
  // Throws gpucache::Error (naming `origin`) when a stride or offset reaches outside the storage.
  void check_bounds(const std::string& origin) const;
  // The elements as one row-major span, without copying. Requires is_contiguous_le().
  std::span<const std::byte> contiguous_bytes() const;
  // Copies elements [first_element, first_element + out.size() / itemsize) in row-major order
  // into out, applying strides and byte order. check_bounds() must have passed.
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
  const Value* find(std::string_view key) const noexcept;
};

}  // namespace gpucache
