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

}  // namespace

ByteRange column_rows_range(const DatasetState& state, const MappedShard& shard,
                            std::size_t selected_position) {
  const auto& column = entry_of(state, shard, selected_position);
  if (column.kind == ColumnKind::text)
    return {column.data_offset + shard.row_lo * 8, column.data_offset + (shard.row_hi + 1) * 8};
  return {column.data_offset + shard.row_lo * column.row_pitch_bytes(),
          column.data_offset + shard.row_hi * column.row_pitch_bytes()};
}

ByteRange text_bytes_range(const DatasetState& state, const MappedShard& shard,
                           std::size_t selected_position) {
  const auto& column = entry_of(state, shard, selected_position);
  const auto offsets = column_rows_range(state, shard, selected_position);
  return {column.aux_offset + read_offset(shard, offsets.begin),
          column.aux_offset + read_offset(shard, offsets.end - 8)};
}

void check_text_offsets(const DatasetState& state, const MappedShard& shard,
                        std::size_t selected_position) {
  const auto& column = entry_of(state, shard, selected_position);
  const auto offsets = column_rows_range(state, shard, selected_position);
  std::uint64_t previous = 0;
  for (std::uint64_t at = offsets.begin; at < offsets.end; at += 8) {
    const std::uint64_t value = read_offset(shard, at);
    if (value > column.aux_size || (at > offsets.begin && value < previous))
      throw Error(shard.file->path(), "byte " + std::to_string(at),
                  "text offset " + std::to_string(value) + " of column '" + column.name +
                      "' decreases or points past its " + std::to_string(column.aux_size) +
                      " text bytes: the shard is corrupt");
    previous = value;
  }
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

TensorLayout plan_tensor_layout(const DatasetState& state) {
  TensorLayout layout;
  const std::uint64_t rows = state.row_end - state.row_begin;
  for (std::size_t c = 0; c < state.columns.size(); ++c) {
    if (state.columns[c].kind != ColumnKind::tensor) continue;
    DeviceColumn column;
    column.column = state.columns[c];
    column.offset = shard::align_up(layout.bytes, shard::kAlignment);
    column.bytes = rows * column.column.row_pitch_bytes();
    layout.bytes = column.offset + column.bytes;
    layout.columns.push_back(column);
    layout.positions.push_back(c);
  }
  return layout;
}

CopyPlan plan_copies(const DatasetState& state, const TensorLayout& layout,
                     const DeviceOptions& options) {
  CopyPlan plan;
  plan.shards = map_needed_shards(state, ShardMapping::Access::read_only);
  plan.verify = options.verify;
  plan.threads = gpucache::detail::resolve_thread_count(options.threads, kDefaultLoadThreadCap);
  plan.staging_bytes = options.staging_bytes;
  for (const MappedShard& shard : plan.shards) {
    ShardCopies& planned = plan.copies.emplace_back();
    planned.shard = &shard;
    for (std::size_t t = 0; t < layout.columns.size(); ++t) {
      const ByteRange range = column_rows_range(state, shard, layout.positions[t]);
      const DeviceColumn& column = layout.columns[t];
      planned.copies.push_back({range.begin,
                                column.offset + shard.out_row * column.column.row_pitch_bytes(),
                                range.end - range.begin});
      plan.bytes_copied += range.end - range.begin;
    }
    std::sort(planned.copies.begin(), planned.copies.end(),
              [](const CopyItem& a, const CopyItem& b) { return a.source < b.source; });
  }
  return plan;
}

}  // namespace gpucache::runtime::detail
