#include "pack_inputs.hpp"

#include <algorithm>
#include <cstdint>

#include "gpucache/common/float_convert.hpp"

namespace gpucache::detail {

PackInputs::PackInputs(std::vector<Source> sources) : sources_(std::move(sources)) {
  for (auto& source : sources_) {
    starts_.push_back(total_);
    total_ += source.rows;
  }
}

std::vector<Source> PackInputs::release_rows() {
  std::vector<Source> released = std::move(sources_);
  sources_.clear();
  for (const auto& source : released) {
    Source kept;
    kept.path = source.path;
    kept.rows = source.rows;
    kept.input_index = source.input_index;
    kept.row_offset = source.row_offset;
    for (InputColumn column : source.columns) {
      column.read_rows = nullptr;
      column.release_rows = nullptr;
      column.direct_rows = nullptr;
      column.row_pointers = nullptr;
      column.device_rows = nullptr;
      column.text_row = nullptr;
      column.row_length = nullptr;
      column.read_sequence = nullptr;
      kept.columns.push_back(std::move(column));
    }
    sources_.push_back(std::move(kept));
  }
  return released;
}

InputRow PackInputs::locate(std::uint64_t global_row) const noexcept {
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), global_row);
  const auto source = static_cast<std::uint32_t>(it - starts_.begin() - 1);
  return {source, global_row - starts_[source]};
}

std::uint64_t PackInputs::rows_left_in_source(std::uint64_t global_row) const noexcept {
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), global_row);
  return (it == starts_.end() ? total_ : *it) - global_row;
}

void PackInputs::read_raw(std::size_t column, std::uint64_t global_first, std::uint64_t count,
                          std::byte* out) const {
  const InputRow at = locate(global_first);
  const InputColumn& source_column = sources_[at.source].columns[column];
  const std::uint64_t bytes =
      count * source_column.row_elements() * dtype_size(source_column.dtype);
  source_column.read_rows(at.row, count, {out, bytes});
  if (source_column.release_rows) source_column.release_rows(at.row, count);
}

void PackInputs::read_f32(std::size_t column, std::uint64_t global_first, std::uint64_t count,
                          float* out) const {
  const InputRow at = locate(global_first);
  const InputColumn& source_column = sources_[at.source].columns[column];
  const std::uint64_t elements = count * source_column.row_elements();
  if (source_column.dtype == DType::f32) {
    read_raw(column, global_first, count, reinterpret_cast<std::byte*>(out));
    return;
  }
  thread_local std::vector<std::byte> raw;
  raw.resize(elements * dtype_size(source_column.dtype));
  read_raw(column, global_first, count, raw.data());
  widen_to_f32(source_column.dtype, raw.data(), out, elements);
}

const float* PackInputs::direct_f32(std::size_t column, std::uint64_t global_first,
                                    std::uint64_t count) const {
  const InputRow at = locate(global_first);
  const InputColumn& source_column = sources_[at.source].columns[column];
  if (source_column.dtype != DType::f32 || !source_column.direct_rows) return nullptr;
  const std::byte* rows = source_column.direct_rows(at.row, count);
  // The converter reads floats: the rows must be aligned for them.
  if (rows == nullptr || reinterpret_cast<std::uintptr_t>(rows) % alignof(float) != 0)
    return nullptr;
  return reinterpret_cast<const float*>(rows);
}

const std::byte* PackInputs::direct_rows(std::size_t column, std::uint64_t global_first,
                                         std::uint64_t count) const {
  const InputRow at = locate(global_first);
  const InputColumn& source_column = sources_[at.source].columns[column];
  return source_column.direct_rows ? source_column.direct_rows(at.row, count) : nullptr;
}

const std::byte* PackInputs::device_rows(std::size_t column, std::uint64_t global_first,
                                         std::uint64_t count, int* device_ordinal) const {
  const InputRow at = locate(global_first);
  const InputColumn& source_column = sources_[at.source].columns[column];
  if (!source_column.device_rows) return nullptr;
  *device_ordinal = source_column.device_ordinal;
  return source_column.device_rows(at.row, count);
}

std::uint64_t PackInputs::value_bytes(std::size_t column, std::uint64_t global_row) const {
  const InputRow at = locate(global_row);
  const InputColumn& source_column = sources_[at.source].columns[column];
  if (source_column.kind == ColumnKind::text) return source_column.text_row(at.row).size();
  return source_column.row_length(at.row) * dtype_size(source_column.dtype);
}

void PackInputs::read_sequence(std::size_t column, std::uint64_t global_row,
                               std::span<std::byte> out) const {
  const InputRow at = locate(global_row);
  sources_[at.source].columns[column].read_sequence(at.row, out);
}

DType PackInputs::dtype(std::size_t column, std::uint64_t global_row) const {
  return sources_[locate(global_row).source].columns[column].dtype;
}

bool PackInputs::row_pointers(std::size_t column, std::uint64_t global_first, std::uint64_t count,
                              const std::byte** out) const {
  const InputRow at = locate(global_first);
  const InputColumn& source_column = sources_[at.source].columns[column];
  return source_column.row_pointers && source_column.row_pointers(at.row, count, out);
}

void PackInputs::release(std::size_t column, std::uint64_t global_first,
                         std::uint64_t count) const {
  const InputRow at = locate(global_first);
  const InputColumn& source_column = sources_[at.source].columns[column];
  if (source_column.release_rows) source_column.release_rows(at.row, count);
}

std::string_view PackInputs::text(std::size_t column, std::uint64_t global_row) const {
  const InputRow at = locate(global_row);
  return sources_[at.source].columns[column].text_row(at.row);
}

bool is_embedding_column(const InputColumn& column) noexcept {
  return column.role == ColumnRole::embedding;
}

}  // namespace gpucache::detail
