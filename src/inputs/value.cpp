#include "gpucache/value.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "gpucache/common/checked_math.hpp"
#include "gpucache/error.hpp"

namespace gpucache {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::uint64_t Tensor::numel() const noexcept {
  std::uint64_t count = 1;
  for (auto extent : shape) count *= static_cast<std::uint64_t>(std::max<std::int64_t>(extent, 0));
  return count;
}

bool Tensor::is_contiguous_le() const noexcept {
  if (big_endian && dtype_size(dtype) > 1) return false;
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

void Tensor::check_bounds(const std::string& origin) const {
  if (strides.size() != shape.size())
    throw Error(origin, "tensor",
                "has " + std::to_string(shape.size()) + " dimensions but " +
                    std::to_string(strides.size()) + " strides");
  const std::uint64_t itemsize = dtype_size(dtype);
  if (itemsize == 0) throw Error(origin, "tensor", "has an unknown dtype");
  if (storage_offset < 0) throw Error(origin, "tensor", "has a negative storage offset");
  std::uint64_t extent_sum = static_cast<std::uint64_t>(storage_offset);
  bool empty = false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) throw Error(origin, "tensor", "has a negative dimension");
    if (strides[i] < 0) throw Error(origin, "tensor", "has a negative stride");
    if (shape[i] == 0) empty = true;
    if (shape[i] > 1) {
      auto reach = detail::checked_mul(static_cast<std::uint64_t>(shape[i] - 1),
                                       static_cast<std::uint64_t>(strides[i]));
      auto sum = reach ? detail::checked_add(extent_sum, *reach) : std::nullopt;
      if (!sum) throw Error(origin, "tensor", "shape and strides overflow 64 bits");
      extent_sum = *sum;
    }
  }
  if (!detail::checked_mul(numel(), itemsize))
    throw Error(origin, "tensor", "byte size overflows 64 bits");
  if (empty) return;
  if (!storage) throw Error(origin, "tensor", "has no storage");
  // The last element reached is at extent_sum; it must fit inside the storage.
  auto end_elements = detail::checked_add(extent_sum, 1);
  auto end_bytes = end_elements ? detail::checked_mul(*end_elements, itemsize) : std::nullopt;
  if (!end_bytes || *end_bytes > storage->size())
    throw Error(origin, "tensor",
                "reaches element " + std::to_string(extent_sum) + " but its storage holds only " +
                    std::to_string(storage->size() / itemsize) + " elements");
}

namespace {

[[noreturn]] void refuse_unread() {
  throw Error("", "tensor",
              "data was not read: the input was opened for its metadata only (as probe does), "
              "so its compressed tensors were left compressed");
}

}  // namespace

std::span<const std::byte> Tensor::contiguous_bytes() const {
  if (!is_contiguous_le()) throw Error("", "tensor", "is not contiguous little-endian");
  if (numel() == 0) return {};
  if (!has_data()) refuse_unread();
  const std::uint64_t itemsize = dtype_size(dtype);
  return storage->bytes.subspan(static_cast<std::uint64_t>(storage_offset) * itemsize,
                                numel() * itemsize);
}

void Tensor::copy_row_major(std::uint64_t first_element, std::span<std::byte> out) const {
  const std::size_t itemsize = dtype_size(dtype);
  const std::uint64_t count = out.size() / itemsize;
  if (count == 0) return;
  if (!has_data()) refuse_unread();
  if (is_contiguous_le()) {
    std::memcpy(out.data(), contiguous_bytes().data() + first_element * itemsize, out.size());
    return;
  }
  // General strided walk: an index per dimension, advanced like an odometer.
  const std::size_t rank = shape.size();
  std::vector<std::int64_t> index(rank, 0);
  std::uint64_t remainder = first_element;
  for (std::size_t i = rank; i-- > 0;) {
    index[i] = static_cast<std::int64_t>(remainder % static_cast<std::uint64_t>(shape[i]));
    remainder /= static_cast<std::uint64_t>(shape[i]);
  }
  std::int64_t offset = storage_offset;
  for (std::size_t i = 0; i < rank; ++i) offset += index[i] * strides[i];
  const std::byte* base = storage->bytes.data();
  std::byte* dst = out.data();
  for (std::uint64_t n = 0; n < count; ++n) {
    const std::byte* src = base + static_cast<std::uint64_t>(offset) * itemsize;
    if (big_endian) {
      for (std::size_t b = 0; b < itemsize; ++b) dst[b] = src[itemsize - 1 - b];
    } else {
      std::memcpy(dst, src, itemsize);
    }
    dst += itemsize;
    for (std::size_t i = rank; i-- > 0;) {
      ++index[i];
      offset += strides[i];
      if (index[i] < shape[i]) break;
      offset -= strides[i] * shape[i];
      index[i] = 0;
    }
  }
}

Tensor Tensor::from_buffer(DType dtype, std::vector<std::int64_t> shape,
                           std::vector<std::byte> data) {
  Tensor tensor;
  tensor.dtype = dtype;
  tensor.strides.resize(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    tensor.strides[i] = stride;
    stride *= shape[i];
  }
  tensor.shape = std::move(shape);
  auto owned = std::make_shared<std::vector<std::byte>>(std::move(data));
  auto storage = std::make_shared<Storage>();
  storage->bytes = {owned->data(), owned->size()};
  storage->owner = owned;
  tensor.storage = std::move(storage);
  return tensor;
}

const List* Value::as_list() const noexcept {
  auto* list = std::get_if<std::shared_ptr<List>>(&data);
  return list ? list->get() : nullptr;
}
const Dict* Value::as_dict() const noexcept {
  auto* dict = std::get_if<std::shared_ptr<Dict>>(&data);
  return dict ? dict->get() : nullptr;
}
const Tensor* Value::as_tensor() const noexcept {
  auto* tensor = std::get_if<std::shared_ptr<Tensor>>(&data);
  return tensor ? tensor->get() : nullptr;
}

std::string_view Value::type_name() const noexcept {
  struct Namer {
    std::string_view operator()(const None&) const { return "None"; }
    std::string_view operator()(bool) const { return "bool"; }
    std::string_view operator()(std::int64_t) const { return "int"; }
    std::string_view operator()(double) const { return "float"; }
    std::string_view operator()(const std::string&) const { return "str"; }
    std::string_view operator()(const std::shared_ptr<List>& list) const {
      return list && list->is_tuple ? "tuple" : "list";
    }
    std::string_view operator()(const std::shared_ptr<Dict>&) const { return "dict"; }
    std::string_view operator()(const std::shared_ptr<Tensor>&) const { return "tensor"; }
  };
  return std::visit(Namer{}, data);
}

// Names of the items, each mapped to its first position, for the items as they were when made.
struct Dict::Index {
  const void* data = nullptr;
  std::size_t size = 0;
  std::unordered_map<std::string_view, std::size_t> positions;
};

Dict& Dict::operator=(const Dict& other) {
  if (this != &other) {
    items = other.items;
    index_.store(nullptr);
  }
  return *this;
}

Dict& Dict::operator=(Dict&& other) noexcept {
  items = std::move(other.items);
  index_.store(nullptr);
  return *this;
}

const Value* Dict::find(std::string_view key) const noexcept {
  constexpr std::size_t kLinearItems = 16;  // a dataset row's few keys: a scan is fastest
  if (items.size() > kLinearItems) {
    try {
      auto index = index_.load();
      if (!index || index->data != items.data() || index->size != items.size()) {
        auto made = std::make_shared<Index>();
        made->data = items.data();
        made->size = items.size();
        made->positions.reserve(items.size());
        for (std::size_t i = 0; i < items.size(); ++i) made->positions.emplace(items[i].first, i);
        index_.store(made);
        index = std::move(made);
      }
      const auto found = index->positions.find(key);
      return found == index->positions.end() ? nullptr : &items[found->second].second;
    } catch (const std::bad_alloc&) {
      // No memory for the index: the scan below still answers.
    }
  }
  for (const auto& [name, value] : items)
    if (name == key) return &value;
  return nullptr;
}

}  // namespace gpucache
