#include "gpucache/memory_input.hpp"

#include <cstring>
#include <string_view>
#include <variant>
#include <vector>

#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/utf8.hpp"
#include "gpucache/common/xxh3.hpp"
#include "gpucache/error.hpp"

namespace gpucache {
namespace {

std::string origin(const MemoryColumn& column) {
  return "memory:" + column.name;
}

void check_offsets(const MemoryColumn& column, std::uint64_t values) {
  if (column.offsets.size() != column.rows + 1)
    throw Error(origin(column), "offsets",
                "has " + std::to_string(column.offsets.size()) + " entries; " +
                    std::to_string(column.rows) + " rows need " + std::to_string(column.rows + 1));
  if (column.offsets.front() != 0)
    throw Error(origin(column), "offsets[0]",
                "is " + std::to_string(column.offsets.front()) + "; offsets start at 0");
  for (std::uint64_t row = 0; row < column.rows; ++row)
    if (column.offsets[row + 1] < column.offsets[row])
      throw Error(origin(column), "offsets[" + std::to_string(row + 1) + "]",
                  "is " + std::to_string(column.offsets[row + 1]) + ", less than offsets[" +
                      std::to_string(row) + "] (" + std::to_string(column.offsets[row]) +
                      "); offsets must not decrease");
  if (static_cast<std::uint64_t>(column.offsets.back()) != values)
    throw Error(origin(column), "offsets[" + std::to_string(column.rows) + "]",
                "is " + std::to_string(column.offsets.back()) + " but the values hold " +
                    std::to_string(values));
}

// The column's null rows, checked: ascending, unique, inside the column.
std::vector<std::uint64_t> checked_null_rows(const MemoryColumn& memory, const std::string& at) {
  for (std::size_t i = 0; i < memory.null_rows.size(); ++i)
    if (memory.null_rows[i] >= memory.rows || (i && memory.null_rows[i] <= memory.null_rows[i - 1]))
      throw Error(at, "null rows", "must be ascending rows of the column");
  return memory.null_rows;
}

InputColumn tensor_column(const MemoryColumn& memory) {
  InputColumn column;
  column.name = memory.name;
  column.kind = ColumnKind::tensor;
  column.dtype = memory.dtype;
  column.row_shape = memory.row_shape;
  column.padded_dim = column.dim();
  column.rows = memory.rows;
  column.path = memory.name;
  column.origin = origin(memory);
  if (memory.row_shape.size() > kMaxRowDims)
    throw Error(column.origin, "shape",
                "has " + std::to_string(memory.row_shape.size() + 1) + " dimensions; at most " +
                    std::to_string(kMaxRowDims + 1) + " are stored");
  std::optional<std::uint64_t> elements = memory.rows;
  for (std::uint64_t extent : memory.row_shape)
    if (elements) elements = detail::checked_mul(*elements, extent);
  const auto bytes =
      elements ? detail::checked_mul(*elements, dtype_size(memory.dtype)) : std::nullopt;
  if (!bytes || *bytes != memory.values.size())
    throw Error(column.origin, "data",
                "holds " + std::to_string(memory.values.size()) + " bytes, not the " +
                    (bytes ? std::to_string(*bytes) : std::string("more than 2^64")) +
                    " its shape and dtype need");
  const std::byte* data = memory.values.data();
  const std::uint64_t pitch = column.row_elements() * dtype_size(memory.dtype);
  column.read_rows = [data, pitch](std::uint64_t first, std::uint64_t count,
                                   std::span<std::byte> out) {
    if (count) std::memcpy(out.data(), data + first * pitch, count * pitch);
  };
  column.direct_rows = [data, pitch](std::uint64_t first, std::uint64_t) {
    return data + first * pitch;
  };
  if (memory.time) {
    if (memory.dtype != DType::i64 || !time_is_valid(*memory.time))
      throw Error(column.origin, "time",
                  describe_time(*memory.time) + " values must be given as int64, not " +
                      std::string(dtype_name(memory.dtype)));
    column.time = memory.time;
  }
  column.null_rows = checked_null_rows(memory, column.origin);
  if (memory.device_values && memory.device_ordinal >= 0) {
    const auto* device = static_cast<const std::byte*>(memory.device_values);
    column.device_rows = [device, pitch](std::uint64_t first, std::uint64_t) {
      return device + first * pitch;
    };
    column.device_ordinal = memory.device_ordinal;
  }
  return column;
}

InputColumn variable_column(const MemoryColumn& memory) {
  InputColumn column;
  column.name = memory.name;
  column.kind = memory.kind;
  column.dtype = memory.kind == ColumnKind::text ? DType::u8 : memory.dtype;
  column.padded_dim = memory.kind == ColumnKind::text ? 1 : 0;
  column.rows = memory.rows;
  column.path = memory.name;
  column.origin = origin(memory);
  column.role = memory.kind == ColumnKind::text ? ColumnRole::text : ColumnRole::sequence;
  const std::size_t itemsize = dtype_size(column.dtype);
  if (memory.values.size() % itemsize != 0)
    throw Error(column.origin, "values",
                "holds " + std::to_string(memory.values.size()) + " bytes, not a whole number of " +
                    std::string(dtype_name(column.dtype)) + " values");
  check_offsets(memory, memory.values.size() / itemsize);
  const std::byte* values = memory.values.data();
  const std::int64_t* offsets = memory.offsets.data();
  if (memory.kind == ColumnKind::text) {
    const std::string_view all(reinterpret_cast<const char*>(values), memory.values.size());
    const std::size_t bad = detail::first_invalid_utf8(all);
    if (bad != all.size()) {
      std::uint64_t row = 0;
      while (static_cast<std::uint64_t>(offsets[row + 1]) <= bad) ++row;
      throw Error(column.origin, "row " + std::to_string(row),
                  "is not valid UTF-8 (byte " + std::to_string(bad - offsets[row]) + ")");
    }
    column.text_row = [all, offsets](std::uint64_t row) {
      return all.substr(offsets[row], offsets[row + 1] - offsets[row]);
    };
  } else {
    column.row_length = [offsets](std::uint64_t row) {
      return static_cast<std::uint64_t>(offsets[row + 1] - offsets[row]);
    };
    column.read_sequence = [values, offsets, itemsize](std::uint64_t row,
                                                       std::span<std::byte> out) {
      if (!out.empty()) std::memcpy(out.data(), values + offsets[row] * itemsize, out.size());
    };
  }
  column.null_rows = checked_null_rows(memory, column.origin);
  return column;
}

}  // namespace

InputData memory_input(const std::vector<MemoryColumn>& columns) {
  InputData data;
  for (const auto& memory : columns) {
    if (memory.name.empty()) throw Error("memory", "column", "has no name");
    switch (memory.kind) {
      case ColumnKind::tensor:
        data.columns.push_back(tensor_column(memory));
        break;
      case ColumnKind::text:
      case ColumnKind::sequence:
        if (memory.device_values)
          throw Error(origin(memory), "device values",
                      "are taken for tensor columns only, not " +
                          std::string(column_kind_name(memory.kind)) + " columns");
        data.columns.push_back(variable_column(memory));
        break;
    }
  }
  if (data.columns.empty()) throw Error("memory", "", "no columns were given");
  return data;
}

MemoryProvenance memory_provenance(const MemoryColumn& column) {
  MemoryProvenance provenance;
  provenance.path = origin(column);
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, column.values.data(), column.values.size());
  provenance.bytes = column.values.size();
  if (column.kind != ColumnKind::tensor) {
    XXH3_64bits_update(state, column.offsets.data(), column.offsets.size_bytes());
    provenance.bytes += column.offsets.size_bytes();
  }
  provenance.xxh3 = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return provenance;
}

namespace {

void hash_value(XXH3_state_t* state, const Value& value, std::uint64_t& bytes) {
  auto put = [&](const void* data, std::size_t size) { XXH3_64bits_update(state, data, size); };
  auto put_text = [&](const std::string& text) {
    const std::uint64_t size = text.size();
    put(&size, sizeof size);
    put(text.data(), text.size());
    bytes += text.size();
  };
  const auto tag = static_cast<std::uint8_t>(value.data.index());
  put(&tag, 1);
  if (const auto* flag = std::get_if<bool>(&value.data)) {
    const std::uint8_t byte = *flag ? 1 : 0;
    put(&byte, 1);
  } else if (const auto* number = value.as_int()) {
    put(number, sizeof *number);
  } else if (const auto* real = value.as_float()) {
    put(real, sizeof *real);
  } else if (const auto* text = value.as_string()) {
    put_text(*text);
  } else if (const List* list = value.as_list()) {
    const std::uint64_t size = list->items.size();
    put(&size, sizeof size);
    for (const auto& item : list->items) hash_value(state, item, bytes);
  } else if (const Dict* dict = value.as_dict()) {
    const std::uint64_t size = dict->items.size();
    put(&size, sizeof size);
    for (const auto& [key, item] : dict->items) {
      put_text(key);
      hash_value(state, item, bytes);
    }
  } else if (const Tensor* tensor = value.as_tensor()) {
    const auto dtype = static_cast<std::uint32_t>(tensor->dtype);
    put(&dtype, sizeof dtype);
    const std::uint64_t rank = tensor->shape.size();
    put(&rank, sizeof rank);
    put(tensor->shape.data(), tensor->shape.size() * sizeof(std::int64_t));
    // Trees from memory hold dense tensors (the binding copies them so); a strided one is
    // hashed in row-major order all the same.
    if (tensor->is_contiguous_le()) {
      const auto data = tensor->contiguous_bytes();
      put(data.data(), data.size());
    } else {
      std::vector<std::byte> dense(tensor->nbytes());
      tensor->copy_row_major(0, dense);
      put(dense.data(), dense.size());
    }
    bytes += tensor->nbytes();
  }
}

}  // namespace

MemoryProvenance memory_tree_provenance(const Value& tree) {
  MemoryProvenance provenance;
  provenance.path = "memory";
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  hash_value(state, tree, provenance.bytes);
  provenance.xxh3 = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return provenance;
}

}  // namespace gpucache
