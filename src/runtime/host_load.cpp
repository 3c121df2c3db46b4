// Dataset::to_host: zero-copy views into the mapped shards, after hashing every chunk they touch
// and checking the offsets of text and sequence columns.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "gpucache/common/parallel.hpp"
#include "joined_view.hpp"
#include "load_plan.hpp"

namespace gpucache::runtime {
namespace detail {

struct HostState {
  std::vector<MappedShard> shards;  // keeps the mappings alive
  std::vector<Column> columns;
  std::vector<std::vector<HostPiece>> pieces;  // per column, per shard
  std::vector<const std::byte*> joined;        // per column: all rows contiguous, or nullptr
  std::vector<std::unique_ptr<JoinedView>> views;
  std::uint64_t rows = 0;
  LoadStats stats;  // bytes_copied stays 0: the views point into the mappings

  std::size_t find(std::string_view name) const {
    for (std::size_t i = 0; i < columns.size(); ++i)
      if (columns[i].name == name) return i;
    throw Error("", "column '" + std::string(name) + "'", "not in this selection");
  }
};

}  // namespace detail

HostData Dataset::to_host(const HostOptions& options) const {
  const auto started = std::chrono::steady_clock::now();
  const detail::DatasetState& state = *state_;
  auto host = std::make_shared<detail::HostState>();
  host->shards = detail::map_needed_shards(state, detail::ShardMapping::Access::copy_on_write);
  host->columns = state.columns;
  host->rows = rows();

  const unsigned threads =
      gpucache::detail::resolve_thread_count(options.threads, detail::kDefaultLoadThreadCap);
  // Offsets first: the values of text and sequence rows are located through them.
  const auto variable = detail::positions_of(state, {ColumnKind::text, ColumnKind::sequence});
  detail::CheckedOffsets checked =
      detail::check_offsets(state, host->shards, variable, options.verify, threads);

  std::vector<std::vector<detail::ByteRange>> ranges(host->shards.size());
  for (std::size_t s = 0; s < host->shards.size(); ++s)
    for (std::size_t c = 0; c < state.columns.size(); ++c)
      ranges[s].push_back(detail::column_rows_range(state, host->shards[s], c));
  if (options.verify) {
    detail::TaskPool pool(threads);
    for (std::size_t s = 0; s < host->shards.size(); ++s) {
      std::vector<detail::ByteRange> wanted = ranges[s];
      for (const std::size_t c : variable)
        wanted.push_back(detail::values_range(state, host->shards[s], c));
      detail::advise_will_need(host->shards[s], wanted);
      host->stats.bytes_verified +=
          detail::submit_chunk_checks(pool, host->shards[s], wanted, checked.verified[s]);
    }
    pool.wait();
  }
  host->stats.bytes_verified += checked.bytes_verified;

  host->pieces.resize(state.columns.size());
  for (std::size_t c = 0; c < state.columns.size(); ++c) {
    for (std::size_t s = 0; s < host->shards.size(); ++s) {
      const auto& shard = host->shards[s];
      const auto& entry = shard.layout->columns[state.selected[c]];
      HostPiece piece;
      piece.data = shard.file->data() + ranges[s][c].begin;
      piece.rows = shard.row_hi - shard.row_lo;
      piece.first_row = shard.out_row;
      piece.shard_index = state.table->shards[shard.table_index].shard_index;
      if (entry.variable_length()) piece.values = shard.file->data() + entry.aux_offset;
      if (entry.kind == ColumnKind::text) piece.text_bytes = piece.values;
      host->pieces[c].push_back(piece);
    }
  }
  // A tensor column across shards becomes one array when its parts meet on page boundaries.
  host->joined.assign(state.columns.size(), nullptr);
  for (std::size_t c = 0; c < state.columns.size(); ++c) {
    if (state.columns[c].kind != ColumnKind::tensor || host->pieces[c].empty()) continue;
    if (host->pieces[c].size() == 1) {
      host->joined[c] = host->pieces[c].front().data;
      continue;
    }
    std::vector<detail::ByteRange> parts;
    for (std::size_t s = 0; s < host->shards.size(); ++s) parts.push_back(ranges[s][c]);
    if (auto view = detail::JoinedView::map(host->shards, parts)) {
      host->joined[c] = view->data();
      host->views.push_back(std::move(view));
    }
  }
  host->stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  HostData data;
  data.state_ = std::move(host);
  return data;
}

const LoadStats& HostData::stats() const noexcept {
  return state_->stats;
}

std::uint64_t HostData::rows() const noexcept {
  return state_->rows;
}
const std::vector<Column>& HostData::columns() const noexcept {
  return state_->columns;
}
const Column& HostData::column(std::string_view name) const {
  return state_->columns[state_->find(name)];
}

std::span<const HostPiece> HostData::pieces(std::string_view column) const {
  return state_->pieces[state_->find(column)];
}

const std::byte* HostData::joined(std::string_view column) const {
  return state_->joined[state_->find(column)];
}

std::span<const std::byte> HostData::row_values(std::string_view column, std::uint64_t row) const {
  const std::size_t c = state_->find(column);
  const Column& described = state_->columns[c];
  if (!described.variable_length())
    throw Error("", "column '" + std::string(column) + "'",
                "is a tensor column; row_values reads text and sequence columns");
  if (row >= state_->rows)
    throw Error("", "column '" + std::string(column) + "'",
                "row " + std::to_string(row) + " is outside the " + std::to_string(state_->rows) +
                    " selected rows");
  const auto& pieces = state_->pieces[c];
  // The last piece starting at or before `row`.
  const auto it =
      std::upper_bound(pieces.begin(), pieces.end(), row,
                       [](std::uint64_t r, const HostPiece& p) { return r < p.first_row; });
  const HostPiece& piece = *(it - 1);
  const std::uint64_t local = row - piece.first_row;
  std::uint64_t begin = 0, end = 0;
  std::memcpy(&begin, piece.data + local * 8, 8);
  std::memcpy(&end, piece.data + (local + 1) * 8, 8);
  // check_offsets vouched for both offsets when the data was loaded.
  const std::uint64_t itemsize = dtype_size(described.dtype);
  return {piece.values + begin * itemsize, (end - begin) * itemsize};
}

std::string_view HostData::text(std::string_view column, std::uint64_t row) const {
  if (this->column(column).kind != ColumnKind::text)
    throw Error("", "column '" + std::string(column) + "'", "is not a text column");
  const auto bytes = row_values(column, row);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::vector<MappedRange> HostData::mapped_ranges() const {
  std::vector<MappedRange> ranges;
  for (const auto& shard : state_->shards)
    ranges.push_back({shard.file->data(), shard.file->size(), shard.file->path()});
  for (std::size_t c = 0; c < state_->columns.size(); ++c)
    if (state_->joined[c] != nullptr && state_->pieces[c].size() > 1)
      ranges.push_back({state_->joined[c], state_->rows * state_->columns[c].row_pitch_bytes(),
                        "joined view of column '" + state_->columns[c].name + "'"});
  return ranges;
}

std::shared_ptr<const void> HostData::owner() const noexcept {
  return state_;
}

}  // namespace gpucache::runtime
