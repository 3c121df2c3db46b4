// A decoded chunk's fixed-width values, wherever they lie: in its own buffer, or in runs, some of
// them read where they lie in the mapped file (parquet_chunk.hpp, FORMAT.md "Values read where
// they lie").
#include <algorithm>
#include <cstring>
#include <utility>

#include "gpucache/common/mapped_file.hpp"
#include "parquet_chunk.hpp"

namespace gpucache::detail::parquet {
namespace {

// The run holding byte `offset` (runs is not empty and starts at 0).
std::size_t run_of(const DecodedChunk& chunk, std::uint64_t offset) {
  const auto after =
      std::upper_bound(chunk.runs.begin(), chunk.runs.end(), offset,
                       [](std::uint64_t at, const ValueRun& run) { return at < run.first_byte; });
  return static_cast<std::size_t>(after - chunk.runs.begin()) - 1;
}

// Where run r ends, in bytes of the values; the last one at the values' end (`end`).
std::uint64_t run_end(const DecodedChunk& chunk, std::size_t r, std::uint64_t end) {
  return r + 1 < chunk.runs.size() ? chunk.runs[r + 1].first_byte : end;
}

}  // namespace

FilePages& FilePages::operator=(FilePages&& other) noexcept {
  if (this != &other) {
    release();
    file_ = std::move(other.file_);
    begin_ = std::exchange(other.begin_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void FilePages::release() noexcept {
  if (size_ > 0) release_if_mapped_file(begin_, size_);
  file_.reset();
  begin_ = nullptr;
  size_ = 0;
}

const std::byte* values_at(const DecodedChunk& chunk, std::uint64_t offset, std::uint64_t length) {
  if (chunk.runs.empty()) return chunk.values.get() + offset;
  const std::size_t r = run_of(chunk, offset);
  if (offset + length > run_end(chunk, r, UINT64_MAX)) return nullptr;
  return chunk.runs[r].at + (offset - chunk.runs[r].first_byte);
}

void copy_values(const DecodedChunk& chunk, std::uint64_t offset, std::uint64_t length,
                 std::byte* out) {
  if (length == 0) return;
  if (chunk.runs.empty()) {
    std::memcpy(out, chunk.values.get() + offset, length);
    return;
  }
  for (std::size_t r = run_of(chunk, offset); length > 0; ++r) {
    const ValueRun& run = chunk.runs[r];
    const std::uint64_t n = std::min(length, run_end(chunk, r, offset + length) - offset);
    std::memcpy(out, run.at + (offset - run.first_byte), n);
    out += n;
    offset += n;
    length -= n;
  }
}

void own_values(DecodedChunk& chunk, std::uint64_t value_bytes) {
  if (chunk.runs.empty()) return;
  ValueBuffer owned(value_bytes);
  copy_values(chunk, 0, value_bytes, owned.get());
  chunk.values = std::move(owned);
  chunk.runs.clear();
  chunk.file_pages = {};
  free_vector(chunk.stitched);
  free_vector(chunk.stitched_rows);
}

void drop_values(DecodedChunk& chunk) {
  chunk.values = {};
  free_vector(chunk.runs);
  chunk.file_pages = {};
  free_vector(chunk.stitched);
  free_vector(chunk.stitched_rows);
}

void stitch_rows(DecodedChunk& chunk, std::uint64_t row_bytes) {
  chunk.stitched.clear();
  chunk.stitched_rows.clear();
  if (chunk.runs.empty() || row_bytes == 0) return;
  for (std::size_t r = 1; r < chunk.runs.size(); ++r) {
    const std::uint64_t boundary = chunk.runs[r].first_byte;
    if (boundary % row_bytes == 0) continue;
    const std::uint64_t row = boundary / row_bytes;
    // A row may cross several runs (pages smaller than a row): it is stitched once.
    if (chunk.stitched_rows.empty() || chunk.stitched_rows.back() != row)
      chunk.stitched_rows.push_back(row);
  }
  chunk.stitched.resize(chunk.stitched_rows.size() * row_bytes);
  for (std::size_t i = 0; i < chunk.stitched_rows.size(); ++i)
    copy_values(chunk, chunk.stitched_rows[i] * row_bytes, row_bytes,
                chunk.stitched.data() + i * row_bytes);
}

const std::byte* row_at(const DecodedChunk& chunk, std::uint64_t row, std::uint64_t row_bytes) {
  if (chunk.runs.empty()) return chunk.values.get() + row * row_bytes;
  const auto stitched =
      std::lower_bound(chunk.stitched_rows.begin(), chunk.stitched_rows.end(), row);
  if (stitched != chunk.stitched_rows.end() && *stitched == row)
    return chunk.stitched.data() + (stitched - chunk.stitched_rows.begin()) * row_bytes;
  return values_at(chunk, row * row_bytes, row_bytes);
}

}  // namespace gpucache::detail::parquet
