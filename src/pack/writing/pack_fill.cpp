#include "pack_fill.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>

#include "gpucache/common/parallel.hpp"
#include "pack_store.hpp"

namespace gpucache::detail {
namespace {

struct Run {
  std::uint64_t offset;  // first output row of the run, relative to the rows span
  std::uint64_t global_first;
  std::uint64_t count;
};

// Runs of consecutive input rows, cut into pieces small enough to spread over threads.
std::vector<Run> runs_of(const PackInputs& inputs, std::span<const std::uint64_t> rows) {
  constexpr std::uint64_t kPiece = 1024;
  std::vector<Run> runs;
  inputs.for_each_run(rows, [&](std::uint64_t offset, std::uint64_t first, std::uint64_t count) {
    for (std::uint64_t done = 0; done < count; done += kPiece)
      runs.push_back({offset + done, first + done, std::min(kPiece, count - done)});
  });
  return runs;
}

// Rows of an output block that are whole pages of `pitch`-byte rows, about `target` bytes.
std::uint64_t page_block_rows(std::uint64_t pitch, std::uint64_t target) {
  const std::uint64_t page_rows = shard::kAlignment / std::gcd(pitch, shard::kAlignment);
  return std::max<std::uint64_t>(1, target / (pitch * page_rows)) * page_rows;
}

// Converts the rows (`dim` values each: an embedding's vector, a tensor row's flattened values) a
// block at a time into a reused buffer stored with one write (so the output pages are written
// whole, never faulted in and zeroed first). f32 rows stored contiguously in a mapped input are
// converted where they lie; others are read into an f32 staging buffer first.
void fill_converted(shard::ShardBuilder& builder, std::size_t column, std::uint64_t dim,
                    const PackInputs& inputs, std::span<const std::uint64_t> rows,
                    RowConverter& converter, unsigned threads, ConversionCounts& counts) {
  const std::uint64_t pitch = builder.columns()[column].row_pitch_bytes();
  bool direct = true;
  inputs.for_each_run(rows, [&](std::uint64_t, std::uint64_t first, std::uint64_t count) {
    direct = direct && inputs.direct_f32(column, first, count) != nullptr;
  });
  // f32 rows stored unchanged need no conversion pass: from a mapped input they are copied file to
  // file; otherwise they are gathered straight into the output block.
  const bool unchanged = converter.copies_rows_unchanged(dim);
  if (direct && unchanged) {
    store_unchanged_rows(builder, column, pitch, inputs, rows, threads);
    return;
  }
  // About 8 MiB of output per block: small enough for the buffers to stay warm in cache. Two
  // buffers: one block is converted while the one before is stored (copied into the page cache and
  // hashed) on another thread, so both run at once.
  const std::uint64_t block = page_block_rows(pitch, 8ull << 20);
  // Every byte of a block is written by the conversion (padding included): no zero-filling first.
  const std::uint64_t block_rows_max = std::min<std::uint64_t>(block, rows.size());
  std::unique_ptr<std::byte[]> converted_blocks[2] = {
      std::make_unique_for_overwrite<std::byte[]>(block_rows_max * pitch),
      std::make_unique_for_overwrite<std::byte[]>(threads == 1 ? 0 : block_rows_max * pitch)};
  BackgroundStore background(builder, column, threads != 1);
  const auto staging =
      direct || unchanged ? nullptr : std::make_unique_for_overwrite<float[]>(block_rows_max * dim);
  // Two, like the blocks: one is written while the next is filled.
  std::vector<const std::byte*> row_pointers[2];
  auto in_place = [&](std::span<const std::uint64_t> block_rows,
                      std::vector<const std::byte*>& pointers) {
    pointers.resize(block_rows.size());
    bool found = true;
    inputs.for_each_run(
        block_rows, [&](std::uint64_t offset, std::uint64_t first, std::uint64_t n) {
          found = found && inputs.row_pointers(column, first, n, pointers.data() + offset);
        });
    return found;
  };
  auto add = [&](const ConversionCounts& converted) {
    counts.overflowed += converted.overflowed;
    counts.flushed_to_zero += converted.flushed_to_zero;
  };
  for (std::uint64_t begin = 0, index = 0; begin < rows.size(); begin += block, ++index) {
    const std::uint64_t count = std::min(block, rows.size() - begin);
    const auto block_rows = rows.subspan(begin, count);
    std::byte* converted_block = converted_blocks[threads == 1 ? 0 : index % 2].get();
    if (direct) {
      inputs.for_each_run(
          block_rows, [&](std::uint64_t offset, std::uint64_t first, std::uint64_t n) {
            add(converter.convert(inputs.direct_f32(column, first, n), n, dim,
                                  converted_block + offset * pitch, begin + offset));
            inputs.release(column, first, n);
          });
    } else if (unchanged && in_place(block_rows, row_pointers[index % 2])) {
      // Rows that lie apart (a tensor each) are written from where they lie while this thread
      // hashes them: no gathering copy.
      const std::span<const std::byte* const> pointers(row_pointers[index % 2].data(), count);
      background.write_rows(begin * pitch, pointers, pitch);
      builder.hash_rows(column, begin * pitch, pointers, pitch);
      continue;
    } else {
      float* rows_f32 = unchanged ? reinterpret_cast<float*>(converted_block) : staging.get();
      const auto runs = runs_of(inputs, block_rows);
      parallel_for_each(runs.size(), threads, [&](std::uint64_t r) {
        inputs.read_f32(column, runs[r].global_first, runs[r].count,
                        rows_f32 + runs[r].offset * dim);
      });
      if (!unchanged) add(converter.convert(staging.get(), count, dim, converted_block, begin));
    }
    background.store(begin * pitch, {converted_block, count * pitch});
  }
  background.finish();
}

// f64 rows stored as f64 but changed on the way (normalised: RowConverter::convert_f64), a block
// at a time through an f64 staging buffer. Every input holds f64 (make_converters).
void fill_converted_f64(shard::ShardBuilder& builder, std::size_t column, std::uint64_t dim,
                        const PackInputs& inputs, std::span<const std::uint64_t> rows,
                        RowConverter& converter, unsigned threads) {
  const std::uint64_t pitch = builder.columns()[column].row_pitch_bytes();
  const std::uint64_t block = page_block_rows(pitch, 8ull << 20);
  const std::uint64_t block_rows_max = std::min<std::uint64_t>(block, rows.size());
  const auto staging = std::make_unique_for_overwrite<double[]>(block_rows_max * dim);
  const auto converted = std::make_unique_for_overwrite<std::byte[]>(block_rows_max * pitch);
  for (std::uint64_t begin = 0; begin < rows.size(); begin += block) {
    const std::uint64_t count = std::min(block, rows.size() - begin);
    const auto runs = runs_of(inputs, rows.subspan(begin, count));
    parallel_for_each(runs.size(), threads, [&](std::uint64_t r) {
      inputs.read_raw(column, runs[r].global_first, runs[r].count,
                      reinterpret_cast<std::byte*>(staging.get() + runs[r].offset * dim));
    });
    converter.convert_f64(staging.get(), count, dim, converted.get());
    builder.store(column, begin * pitch, {converted.get(), count * pitch});
  }
}

// Rows stored as they are (any dtype, no padding): copied file to file when every run lies in a
// mapped input, else read into the shard.
void fill_raw(shard::ShardBuilder& builder, std::size_t column, const PackInputs& inputs,
              std::span<const std::uint64_t> rows, unsigned threads) {
  const auto& entry = builder.columns()[column];
  const std::uint64_t row_bytes = entry.row_elements() * dtype_size(entry.dtype);
  bool direct = row_bytes == entry.row_pitch_bytes();
  inputs.for_each_run(rows, [&](std::uint64_t, std::uint64_t first, std::uint64_t count) {
    direct = direct && inputs.direct_rows(column, first, count) != nullptr;
  });
  if (direct && !rows.empty()) {
    store_unchanged_rows(builder, column, row_bytes, inputs, rows, threads);
    return;
  }
  std::byte* out = builder.tensor_data(column).data();
  const auto runs = runs_of(inputs, rows);
  parallel_for_each(runs.size(), threads, [&](std::uint64_t r) {
    if (row_bytes == entry.row_pitch_bytes()) {
      inputs.read_raw(column, runs[r].global_first, runs[r].count,
                      out + runs[r].offset * row_bytes);
      return;
    }
    thread_local std::vector<std::byte> packed;
    packed.resize(runs[r].count * row_bytes);
    inputs.read_raw(column, runs[r].global_first, runs[r].count, packed.data());
    for (std::uint64_t i = 0; i < runs[r].count; ++i)
      std::memcpy(out + (runs[r].offset + i) * entry.row_pitch_bytes(),
                  packed.data() + i * row_bytes, row_bytes);
  });
}

// Text and sequences: each row's values after the last, and the offsets (counting values) that
// say where each row starts.
void fill_variable(shard::ShardBuilder& builder, std::size_t column, const PackInputs& inputs,
                   std::span<const std::uint64_t> rows) {
  auto offsets = builder.offsets(column);
  auto values = builder.values(column);
  const std::uint64_t itemsize = dtype_size(builder.columns()[column].dtype);
  const bool text = builder.columns()[column].kind == ColumnKind::text;
  std::uint64_t cursor = 0;  // in bytes
  for (std::uint64_t r = 0; r < rows.size(); ++r) {
    offsets[r] = cursor / itemsize;
    if (text) {
      const auto row = inputs.text(column, rows[r]);
      std::memcpy(values.data() + cursor, row.data(), row.size());
      cursor += row.size();
    } else {
      const std::uint64_t bytes = inputs.value_bytes(column, rows[r]);
      inputs.read_sequence(column, rows[r], values.subspan(cursor, bytes));
      cursor += bytes;
    }
  }
  offsets[rows.size()] = cursor / itemsize;
}

}  // namespace

ConversionCounts fill_shard(shard::ShardBuilder& builder, const std::vector<Column>& specs,
                            const PackInputs& inputs, std::span<const std::uint64_t> rows,
                            std::vector<std::unique_ptr<RowConverter>>& converters,
                            unsigned threads, Progress& progress) {
  ConversionCounts counts;
  const std::size_t input_columns = specs.size() - 2;  // then @source, @source_row
  for (std::size_t c = 0; c < input_columns; ++c) {
    if (specs[c].variable_length())
      fill_variable(builder, c, inputs, rows);
    else if (converters[c] && specs[c].dtype == DType::f64)
      fill_converted_f64(builder, c, specs[c].row_elements(), inputs, rows, *converters[c],
                         threads);
    else if (converters[c])
      fill_converted(builder, c, specs[c].row_elements(), inputs, rows, *converters[c], threads,
                     counts);
    else
      fill_raw(builder, c, inputs, rows, threads);
    progress.advance(rows.size());
  }
  static_assert(shard::kSourceColumnDType == DType::i32 &&
                shard::kSourceRowColumnDType == DType::i64);
  auto* sources = reinterpret_cast<std::int32_t*>(builder.tensor_data(input_columns).data());
  auto* source_rows =
      reinterpret_cast<std::int64_t*>(builder.tensor_data(input_columns + 1).data());
  for (std::uint64_t r = 0; r < rows.size(); ++r) {
    const InputRow at = inputs.locate(rows[r]);
    const Source& source = inputs.sources()[at.source];
    sources[r] = static_cast<std::int32_t>(source.input_index);
    source_rows[r] = static_cast<std::int64_t>(source.row_offset + at.row);
  }
  return counts;
}

}  // namespace gpucache::detail
