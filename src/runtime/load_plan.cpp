#include "load_plan.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "gpucache/common/parallel.hpp"

namespace gpucache::runtime::detail {
namespace {

const shard::ColumnEntry& entry_of(const DatasetState& state, const MappedShard& shard,
                                   std::size_t selected_position) {
  return shard.layout->columns[state.selected[selected_position]];
}

std::uint64_t read_offset(const MappedShard& shard, std::uint64_t at) {
  std::uint64_t value = 0;
  std::memcpy(&value, shard.file->data() + at, sizeof value);  // little-endian hosts only
  return value;
}

void check_offsets_rule(const DatasetState& state, const MappedShard& shard,
                        std::size_t selected_position) {
  const auto& column = entry_of(state, shard, selected_position);
  const ByteRange offsets = column_rows_range(state, shard, selected_position);
  const std::uint64_t rows = shard.row_hi - shard.row_lo;
  const bool whole_shard = shard.row_lo == 0 && shard.row_hi == shard.layout->header.row_count;
  if (const auto bad = shard::find_bad_offset(shard.file->data() + offsets.begin, rows,
                                              shard::offset_limit(column), whole_shard))
    throw shard::bad_offset_error(shard.file->path(), column, shard.row_lo, *bad,
                                  offsets.begin + *bad * 8);
}

}  // namespace

ByteRange column_rows_range(const DatasetState& state, const MappedShard& shard,
                            std::size_t selected_position) {
  const auto& column = entry_of(state, shard, selected_position);
  if (column.variable_length())
    return {column.data_offset + shard.row_lo * 8, column.data_offset + (shard.row_hi + 1) * 8};
  return {column.data_offset + shard.row_lo * column.row_pitch_bytes(),
          column.data_offset + shard.row_hi * column.row_pitch_bytes()};
}

ByteRange values_range(const DatasetState& state, const MappedShard& shard,
                       std::size_t selected_position) {
  const auto& column = entry_of(state, shard, selected_position);
  const auto offsets = column_rows_range(state, shard, selected_position);
  const std::uint64_t itemsize = dtype_size(column.dtype);
  return {column.aux_offset + read_offset(shard, offsets.begin) * itemsize,
          column.aux_offset + read_offset(shard, offsets.end - 8) * itemsize};
}

CheckedOffsets check_offsets(const DatasetState& state, const std::vector<MappedShard>& shards,
                             const std::vector<std::size_t>& positions, bool verify,
                             unsigned threads) {
  CheckedOffsets checked;
  checked.verified.resize(shards.size());
  if (positions.empty()) return checked;
  TaskPool pool(threads);
  if (verify) {
    for (std::size_t s = 0; s < shards.size(); ++s) {
      std::vector<ByteRange> ranges;
      for (const std::size_t c : positions)
        ranges.push_back(column_rows_range(state, shards[s], c));
      advise_will_need(shards[s], ranges);
      checked.bytes_verified += submit_chunk_checks(pool, shards[s], ranges, checked.verified[s]);
    }
    pool.wait();  // hashed before the rule reads them: a mismatch is the clearer error
  }
  for (const MappedShard& shard : shards)
    for (const std::size_t c : positions)
      pool.submit([&state, &shard, c] { check_offsets_rule(state, shard, c); });
  pool.wait();
  return checked;
}

void advise_will_need(const MappedShard& shard, const std::vector<ByteRange>& ranges) noexcept {
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  auto* base = const_cast<std::byte*>(shard.file->data());
  for (const auto& range : ranges) {
    if (range.begin >= range.end) continue;
    const std::uint64_t begin = range.begin / page * page;
    ::madvise(base + begin, range.end - begin, MADV_WILLNEED);
  }
}

std::uint64_t submit_chunk_checks(TaskPool& pool, const MappedShard& shard,
                                  const std::vector<ByteRange>& ranges,
                                  std::vector<std::uint64_t>& done) {
  const auto& header = shard.layout->header;
  std::vector<std::uint64_t> wanted = chunks_touching(header, ranges), fresh;
  std::set_difference(wanted.begin(), wanted.end(), done.begin(), done.end(),
                      std::back_inserter(fresh));
  std::uint64_t bytes = 0;
  for (const std::uint64_t chunk : fresh) {
    const ByteRange range = chunk_range(header, chunk);
    bytes += range.end - range.begin;
    pool.submit([&shard, chunk, range] {
      check_chunk({shard.file->data() + range.begin, range.end - range.begin}, *shard.layout, chunk,
                  shard.file->path());
    });
  }
  std::vector<std::uint64_t> merged;
  std::merge(done.begin(), done.end(), fresh.begin(), fresh.end(), std::back_inserter(merged));
  done = std::move(merged);
  return bytes;
}

std::vector<ByteRange> source_ranges(const ShardCopies& copies) {
  std::vector<ByteRange> ranges;
  for (const auto& copy : copies.copies) ranges.push_back({copy.source, copy.source + copy.bytes});
  return ranges;
}

std::vector<std::size_t> positions_of(const DatasetState& state,
                                      std::initializer_list<ColumnKind> kinds) {
  std::vector<std::size_t> positions;
  for (std::size_t c = 0; c < state.columns.size(); ++c)
    if (std::find(kinds.begin(), kinds.end(), state.columns[c].kind) != kinds.end())
      positions.push_back(c);
  return positions;
}

DeviceLayout plan_device_layout(const DatasetState& state, const std::vector<MappedShard>& shards) {
  DeviceLayout layout;
  const std::uint64_t rows = state.row_end - state.row_begin;
  const auto uploaded = positions_of(state, {ColumnKind::tensor, ColumnKind::sequence});
  for (const std::size_t c : uploaded) {
    DeviceColumn column;
    column.column = state.columns[c];
    if (column.column.kind == ColumnKind::sequence) {
      column.offsets_offset = shard::align_up(layout.offsets_bytes, shard::kAlignment);
      layout.offsets_bytes = column.offsets_offset + (rows + 1) * 8;
      std::uint64_t bytes = 0;
      for (const MappedShard& shard : shards) {
        const ByteRange values = values_range(state, shard, c);
        bytes += values.end - values.begin;
      }
      column.bytes = bytes;
      column.values = bytes / dtype_size(column.column.dtype);
    } else {
      column.bytes = rows * column.column.row_pitch_bytes();
    }
    layout.columns.push_back(std::move(column));
    layout.positions.push_back(c);
  }
  layout.bytes = layout.offsets_bytes;
  for (DeviceColumn& column : layout.columns) {
    column.offset = shard::align_up(layout.bytes, shard::kAlignment);
    layout.bytes = column.offset + column.bytes;
  }
  return layout;
}

std::uint64_t device_bytes_bound(const DatasetState& state) {
  const std::uint64_t rows = state.row_end - state.row_begin;
  std::uint64_t total = 0;
  bool sequences = false;
  for (const Column& column : state.columns) {
    if (column.kind == ColumnKind::tensor) {
      total += shard::align_up(rows * column.row_pitch_bytes(), shard::kAlignment);
    } else if (column.kind == ColumnKind::sequence) {
      sequences = true;
      total += shard::align_up((rows + 1) * 8, shard::kAlignment);
    }
  }
  if (!sequences) return total;
  const auto& table = *state.table;
  for (std::size_t k = 0; k < table.shards.size(); ++k) {
    const std::uint64_t begin = table.starts[k], end = begin + table.shards[k].rows;
    if (begin < state.row_end && end > state.row_begin && begin < end)
      total += table.shards[k].file_size;
  }
  return total;
}

void fill_sequence_offsets(const DatasetState& state, const std::vector<MappedShard>& shards,
                           const DeviceLayout& layout, std::byte* out, unsigned threads) {
  if (layout.offsets_bytes == 0) return;
  std::memset(out, 0, layout.offsets_bytes);
  const std::uint64_t rows = state.row_end - state.row_begin;
  for (std::size_t t = 0; t < layout.columns.size(); ++t) {
    const DeviceColumn& column = layout.columns[t];
    if (column.column.kind != ColumnKind::sequence) continue;
    const std::size_t c = layout.positions[t];
    const std::uint64_t itemsize = dtype_size(column.column.dtype);
    // Where each shard's first selected value lands among the column's values.
    std::vector<std::uint64_t> bases;
    std::uint64_t next = 0;
    for (const MappedShard& shard : shards) {
      bases.push_back(next);
      const ByteRange values = values_range(state, shard, c);
      next += (values.end - values.begin) / itemsize;
    }
    std::byte* column_out = out + column.offsets_offset;
    gpucache::detail::parallel_for(
        shards.size(), threads, 1, [&](std::uint64_t b, std::uint64_t e) {
          for (std::uint64_t s = b; s < e; ++s) {
            const MappedShard& shard = shards[s];
            const ByteRange offsets = column_rows_range(state, shard, c);
            const std::uint64_t first = read_offset(shard, offsets.begin);
            for (std::uint64_t i = 0; i + shard.row_lo < shard.row_hi; ++i) {
              const auto value = static_cast<std::int64_t>(
                  bases[s] + read_offset(shard, offsets.begin + i * 8) - first);
              std::memcpy(column_out + (shard.out_row + i) * 8, &value, 8);
            }
          }
        });
    const auto total = static_cast<std::int64_t>(next);
    std::memcpy(column_out + rows * 8, &total, 8);
  }
}

CopyPlan plan_copies(const DatasetState& state, std::vector<MappedShard> shards,
                     const DeviceLayout& layout, const DeviceOptions& options) {
  CopyPlan plan;
  plan.shards = std::move(shards);
  plan.verify = options.verify;
  plan.threads = gpucache::detail::resolve_thread_count(options.threads, kDefaultLoadThreadCap);
  plan.staging_bytes = options.staging_bytes;
  std::vector<std::uint64_t> written(layout.columns.size(), 0);  // bytes placed, per column
  for (const MappedShard& shard : plan.shards) {
    ShardCopies& planned = plan.copies.emplace_back();
    planned.shard = &shard;
    for (std::size_t t = 0; t < layout.columns.size(); ++t) {
      const DeviceColumn& column = layout.columns[t];
      const ByteRange range = column.column.kind == ColumnKind::sequence
                                  ? values_range(state, shard, layout.positions[t])
                                  : column_rows_range(state, shard, layout.positions[t]);
      planned.copies.push_back({range.begin, column.offset + written[t], range.end - range.begin});
      written[t] += range.end - range.begin;
      plan.bytes_copied += range.end - range.begin;
    }
    std::sort(planned.copies.begin(), planned.copies.end(),
              [](const CopyItem& a, const CopyItem& b) { return a.source < b.source; });
  }
  return plan;
}

}  // namespace gpucache::runtime::detail
