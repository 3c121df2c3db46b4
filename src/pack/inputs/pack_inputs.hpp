// The inputs of one pack run seen as one concatenated table: global row g of the dataset is row
// g - start(s) of input s. Reads runs of rows as raw elements or widened to f32.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "pack_source.hpp"

namespace gpucache::detail {

struct InputRow {
  std::uint32_t source;
  std::uint64_t row;
};

class PackInputs {
 public:
  explicit PackInputs(std::vector<Source> sources);

  const std::vector<Source>& sources() const noexcept { return sources_; }
  // Hands over what the rows live in (parsed object trees, mappings, row readers), keeping each
  // source's path and column metadata, all the manifest and rejects need afterwards: no rows can
  // be read any more. Freeing a parse of millions of objects takes a while, so pack does it on
  // another thread while the last shard is written.
  std::vector<Source> release_rows();
  const Source& first() const noexcept { return sources_.front(); }
  std::uint64_t total_rows() const noexcept { return total_; }
  InputRow locate(std::uint64_t global_row) const noexcept;
  std::uint64_t rows_left_in_source(std::uint64_t global_row) const noexcept;

  // Rows [global_first, global_first + count) of a tensor column, which must lie in one input.
  void read_raw(std::size_t column, std::uint64_t global_first, std::uint64_t count,
                std::byte* out) const;
  void read_f32(std::size_t column, std::uint64_t global_first, std::uint64_t count,
                float* out) const;
  // The same rows of an f32 column read in place, or nullptr when the input does not store them
  // contiguously as little-endian f32 (then use read_f32). release() after use.
  const float* direct_f32(std::size_t column, std::uint64_t global_first,
                          std::uint64_t count) const;
  // The element type of a tensor column in the input holding global_row.
  DType dtype(std::size_t column, std::uint64_t global_row) const;
  // Where each of the same rows lies in memory as little-endian values of the column's own type,
  // when each does (a tensor per row): into out, true; false when one does not (then read them).
  bool row_pointers(std::size_t column, std::uint64_t global_first, std::uint64_t count,
                    const std::byte** out) const;
  // Lets the input pages of rows read in place leave the resident set.
  void release(std::size_t column, std::uint64_t global_first, std::uint64_t count) const;
  // The same rows where they lie, of the column's own dtype, or nullptr (then use read_raw).
  const std::byte* direct_rows(std::size_t column, std::uint64_t global_first,
                               std::uint64_t count) const;
  // The same rows in CUDA device memory (a CUDA tensor's) and the device holding them, or
  // nullptr when the input has no device copy of them. For the CUDA validation backend only.
  const std::byte* device_rows(std::size_t column, std::uint64_t global_first, std::uint64_t count,
                               int* device_ordinal) const;
  std::string_view text(std::size_t column, std::uint64_t global_row) const;
  // Variable-length columns: the bytes a row's values take (its UTF-8 bytes for text), and a
  // sequence row's values copied into out.
  std::uint64_t value_bytes(std::size_t column, std::uint64_t global_row) const;
  void read_sequence(std::size_t column, std::uint64_t global_row, std::span<std::byte> out) const;

  // Calls visit(offset, global_first, count) for each maximal run of rows[offset...] whose global
  // rows are consecutive and inside one input, so each run is one bulk read.
  template <typename Visit>
  void for_each_run(std::span<const std::uint64_t> rows, Visit&& visit) const {
    std::uint64_t offset = 0;
    while (offset < rows.size()) {
      const std::uint64_t first = rows[offset];
      const std::uint64_t limit = rows_left_in_source(first);
      std::uint64_t count = 1;
      while (offset + count < rows.size() && count < limit && rows[offset + count] == first + count)
        ++count;
      visit(offset, first, count);
      offset += count;
    }
  }

 private:
  std::vector<Source> sources_;
  std::vector<std::uint64_t> starts_;
  std::uint64_t total_ = 0;
};

// Embedding columns: the ones validation checks as embeddings (docs/validation.md).
bool is_embedding_column(const InputColumn& column) noexcept;

}  // namespace gpucache::detail
