// BatchStream: reader threads gather batches (in BatchOrder's order) from the mapped shards into
// blocks; for a GPU each block is copied to the device on the stream's own CUDA stream.
#include "gpucache/batch_stream.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "cuda_api.hpp"
#include "cuda_stream.hpp"
#include "gpucache/common/parallel.hpp"
#include "gpucache/remote/remote.hpp"
#include "load_plan.hpp"
#include "stream_blocks.hpp"
#include "stream_chunk_checks.hpp"
#include "task_pool.hpp"

namespace gpucache::runtime {
namespace detail {

namespace {

constexpr std::uint64_t kRegionAlignment = 256;  // of every column in a batch block

std::uint64_t read_u64(const std::byte* at) {
  std::uint64_t value = 0;
  std::memcpy(&value, at, sizeof value);
  return value;
}

struct Job {
  std::uint64_t index = 0;
  std::shared_ptr<const BatchOrder> order;
  std::uint64_t generation = 0;
  bool started = false, done = false;
  std::shared_ptr<BatchBlock> block;
  std::exception_ptr error;
};

}  // namespace

struct StreamState {
  std::shared_ptr<const DatasetState> dataset;
  StreamOptions options;
  // The selection's shards in row order. A local dataset's are mapped when the stream opens; a
  // remote dataset's are fetched and mapped one by one (open_shard) as batches reach them, the
  // prefetcher fetching up to options.prefetch_shards ahead of the readers.
  std::vector<MappedShard> shards;
  bool lazy = false;
  std::unique_ptr<std::atomic<bool>[]> ready;  // shards[s] is mapped and checked
  std::unique_ptr<std::mutex[]> opening;       // held while shards[s] is fetched and mapped
  SegmentIds segment_ids;
  std::vector<std::size_t> offset_positions;  // text and sequence columns
  unsigned threads = 1;
  const CudaApi* cuda = nullptr;
  std::string where;
  std::optional<CudaStream> copy_stream;
  std::unique_ptr<ChunkChecks> checks;
  std::shared_ptr<BlockPool> pool;

  std::uint64_t epoch = 0, next = 0;  // of the next batch handed out
  std::uint64_t generation = 1;
  std::shared_ptr<const BatchOrder> order;  // of `epoch`
  std::uint64_t handed_out = 0;
  std::atomic<std::uint64_t> bytes_gathered{0};

  std::mutex mutex;
  std::condition_variable wake, finished;
  std::deque<std::shared_ptr<Job>> in_flight;  // batches next, next + 1, ... in order
  std::uint64_t submitted = 0;                 // next batch index to put in flight
  bool stopping = false;
  std::vector<std::thread> workers;

  // The prefetcher's plan (lazy streams): the shards in the order the batches from `next` on first
  // use them, and how far along it the readers are.
  std::condition_variable wake_prefetcher;
  // The generation whose batches were last asked for (next()): the prefetcher plans for it, so
  // that a seek, or the move to the next epoch at an epoch's end, fetches nothing until a batch of
  // the new position is asked for.
  std::uint64_t asked = 0;
  std::uint64_t plan_generation = 0;
  std::vector<std::size_t> plan_position;  // of each shard in the plan
  std::size_t reached = 0;                 // plan entries a gathered batch has reached
  std::thread prefetcher;

  // Fetches (remote), maps and checks shard s once; readers and the prefetcher that need it at the
  // same time wait for the one opening it. A failure leaves it closed: the next use tries again.
  void open_shard(std::size_t s) {
    if (ready[s].load(std::memory_order_acquire)) return;
    const std::lock_guard lock(opening[s]);
    if (ready[s].load(std::memory_order_relaxed)) return;
    MappedShard& shard = shards[s];
    if (dataset->table->remote) dataset->table->remote->fetch_shards({shard.table_index});
    MappedShard mapped = shard;
    map_shard(*dataset, mapped, ShardMapping::Access::read_only, segment_ids);
    check_offsets(*dataset, {mapped}, offset_positions, false, 1);
    shard.file = std::move(mapped.file);
    shard.layout = std::move(mapped.layout);
    checks->add(s);
    ready[s].store(true, std::memory_order_release);
  }

  // The shards in the order batches from `from` (every stride-th) first use them.
  std::vector<std::size_t> first_use(const BatchOrder& plan_order, std::uint64_t from,
                                     std::uint64_t stride) const {
    std::vector<std::size_t> plan;
    std::vector<bool> seen(shards.size());
    for (std::uint64_t b = from; b < plan_order.batches() && plan.size() < shards.size();
         b += stride)
      for (const std::uint64_t row : plan_order.batch(b)) {
        const std::size_t s = slot_of(row);
        if (!seen[s]) {
          seen[s] = true;
          plan.push_back(s);
        }
      }
    return plan;
  }

  std::size_t slot_of(std::uint64_t row) const {
    const auto it =
        std::upper_bound(shards.begin(), shards.end(), row,
                         [](std::uint64_t r, const MappedShard& s) { return r < s.out_row; });
    return static_cast<std::size_t>(it - shards.begin()) - 1;
  }

  void prefetch() {
    std::unique_lock lock(mutex);
    std::uint64_t planned = 0;
    std::vector<std::size_t> plan;
    std::size_t i = 0;
    for (;;) {
      wake_prefetcher.wait(lock, [&] {
        // The plan of a position left by a seek is not followed further.
        return stopping || asked != planned ||
               (generation == planned && i < plan.size() && i < reached + options.prefetch_shards);
      });
      if (stopping) return;
      if (asked != planned) {
        planned = asked;
        const auto plan_order = order;
        const std::uint64_t from = next, stride = options.stride;
        lock.unlock();
        std::vector<std::size_t> fresh = first_use(*plan_order, from, stride);
        lock.lock();
        if (asked != planned) continue;  // a seek meanwhile: plan again
        plan = std::move(fresh);
        plan_position.assign(shards.size(), shards.size());
        for (std::size_t k = 0; k < plan.size(); ++k) plan_position[plan[k]] = k;
        plan_generation = planned;
        reached = 0;
        i = 0;
        continue;
      }
      // Every shard the depth allows now, fetched together (in parallel, the connections spread
      // over them), then mapped one by one.
      std::vector<std::size_t> batch;
      for (; i < plan.size() && i < reached + options.prefetch_shards; ++i)
        if (!ready[plan[i]].load(std::memory_order_acquire)) batch.push_back(plan[i]);
      lock.unlock();
      try {
        open_shards(batch);
      } catch (...) {
        // Left closed: the reader that needs it opens it again and reports the error.
      }
      lock.lock();
    }
  }

  // Opens shards `which` (indices into `shards`); those not yet open are first fetched together,
  // so that their requests are in flight at once.
  void open_shards(const std::vector<std::size_t>& which) {
    std::vector<std::size_t> missing;
    for (const std::size_t s : which)
      if (!ready[s].load(std::memory_order_acquire)) missing.push_back(shards[s].table_index);
    if (missing.size() > 1 && dataset->table->remote) dataset->table->remote->fetch_shards(missing);
    for (const std::size_t s : which) open_shard(s);
  }

  void start_epoch(std::uint64_t new_epoch, std::uint64_t batch) {
    OrderOptions order_options = options.order;
    order_options.rows = dataset->row_end - dataset->row_begin;
    order_options.epoch = new_epoch;
    order = std::make_shared<const BatchOrder>(order_options);
    epoch = new_epoch;
    next = submitted = std::min(batch, order->batches());
    ++generation;
    in_flight.clear();  // workers still gathering a dropped job finish it and drop it
    wake_prefetcher.notify_all();
  }

  // Puts batches in flight up to `prefetch` ahead (holding the mutex).
  void fill() {
    while (in_flight.size() < options.prefetch && submitted < order->batches()) {
      auto job = std::make_shared<Job>();
      job->index = submitted;
      submitted += options.stride;
      job->order = order;
      job->generation = generation;
      in_flight.push_back(std::move(job));
    }
    wake.notify_all();
  }

  void work() {
    std::unique_lock lock(mutex);
    for (;;) {
      std::shared_ptr<Job> job;
      wake.wait(lock, [&] {
        if (stopping) return true;
        for (const auto& candidate : in_flight)
          if (!candidate->started) return true;
        return false;
      });
      if (stopping) return;
      for (const auto& candidate : in_flight)
        if (!candidate->started) {
          job = candidate;
          break;
        }
      job->started = true;
      lock.unlock();
      std::shared_ptr<BatchBlock> block;
      std::exception_ptr error;
      try {
        block = gather(*job);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      job->block = std::move(block);
      job->error = error;
      job->done = true;
      finished.notify_all();
    }
  }

  std::shared_ptr<BatchBlock> gather(const Job& job);
};

namespace {

struct Located {
  std::size_t shard = 0;
  std::uint64_t row = 0;  // in the shard file
};

}  // namespace

std::shared_ptr<BatchBlock> StreamState::gather(const Job& job) {
  const DatasetState& state = *dataset;
  std::vector<std::uint64_t> rows = job.order->batch(job.index);
  std::vector<Located> located(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::size_t s = slot_of(rows[i]);
    located[i] = {s, shards[s].row_lo + rows[i] - shards[s].out_row};
  }
  if (lazy) {
    std::vector<std::size_t> needed;
    for (const Located& at : located)
      if (needed.empty() || needed.back() != at.shard) needed.push_back(at.shard);
    std::sort(needed.begin(), needed.end());
    needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
    {
      // How far along the plan the readers are: the prefetcher keeps prefetch_shards past it.
      const std::lock_guard lock(mutex);
      if (plan_generation == job.generation) {
        std::size_t furthest = 0;
        for (const std::size_t s : needed)
          if (plan_position[s] < shards.size()) furthest = std::max(furthest, plan_position[s] + 1);
        if (furthest > reached) {
          reached = furthest;
          wake_prefetcher.notify_all();
        }
      }
    }
    open_shards(needed);
  }
  const auto entry = [&](const Located& at, std::size_t c) -> const shard::ColumnEntry& {
    return shards[at.shard].layout->columns[state.selected[c]];
  };

  // Pass 1: the offsets of variable-length rows (hashed first), to size the block.
  const std::size_t count = rows.size();
  std::vector<std::vector<std::uint64_t>> starts(state.columns.size()),
      lengths(state.columns.size());
  std::vector<BatchColumn> columns(state.columns.size());
  std::uint64_t bytes = 0;
  for (std::size_t c = 0; c < state.columns.size(); ++c) {
    BatchColumn& column = columns[c];
    column.column = state.columns[c];
    if (!column.column.variable_length()) {
      bytes = shard::align_up(bytes, kRegionAlignment);
      column.bytes = count * column.column.row_pitch_bytes();
      column.data = reinterpret_cast<std::byte*>(bytes);  // an offset until the block exists
      bytes += column.bytes;
      continue;
    }
    starts[c].resize(count);
    lengths[c].resize(count);
    std::uint64_t values = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const auto& e = entry(located[i], c);
      const std::uint64_t at = e.data_offset + located[i].row * 8;
      if (options.verify) checks->ensure(located[i].shard, at, at + 16, job.generation);
      const std::byte* base = shards[located[i].shard].file->data();
      starts[c][i] = read_u64(base + at);
      lengths[c][i] = read_u64(base + at + 8) - starts[c][i];
      values += lengths[c][i];
    }
    column.values = values;
    bytes = shard::align_up(bytes, kRegionAlignment);
    column.offsets = reinterpret_cast<std::int64_t*>(bytes);
    bytes += (count + 1) * 8;
    bytes = shard::align_up(bytes, kRegionAlignment);
    column.data = reinterpret_cast<std::byte*>(bytes);
    column.bytes = values * dtype_size(column.column.dtype);
    bytes += column.bytes;
  }

  // The block's memory and events, and the copy, belong to the stream's device.
  std::optional<DeviceScope> scope;
  if (cuda) scope.emplace(*cuda, options.device, where);
  std::shared_ptr<BatchBlock> block = pool->acquire();
  block->wait_for_copy();
  block->reserve(std::max<std::uint64_t>(bytes, 1));
  std::byte* host = block->host;
  const auto at = [](std::byte* base, const void* offset) {
    return base + reinterpret_cast<std::uintptr_t>(offset);
  };

  // Pass 2: copy the rows, each chunk hashed before its bytes are used.
  for (std::size_t c = 0; c < state.columns.size(); ++c) {
    const BatchColumn& column = columns[c];
    std::byte* out = at(host, column.data);
    if (!column.column.variable_length()) {
      const std::uint64_t pitch = column.column.row_pitch_bytes();
      for (std::size_t i = 0; i < count; ++i) {
        const auto& e = entry(located[i], c);
        const std::uint64_t from = e.data_offset + located[i].row * pitch;
        if (options.verify) checks->ensure(located[i].shard, from, from + pitch, job.generation);
        std::memcpy(out + i * pitch, shards[located[i].shard].file->data() + from, pitch);
      }
      continue;
    }
    const std::uint64_t itemsize = dtype_size(column.column.dtype);
    std::byte* offsets = at(host, column.offsets);
    std::int64_t next_value = 0;
    for (std::size_t i = 0; i < count; ++i) {
      std::memcpy(offsets + i * 8, &next_value, 8);
      const auto& e = entry(located[i], c);
      const std::uint64_t from = e.aux_offset + starts[c][i] * itemsize;
      const std::uint64_t size = lengths[c][i] * itemsize;
      if (options.verify) checks->ensure(located[i].shard, from, from + size, job.generation);
      if (size)
        std::memcpy(out + next_value * itemsize, shards[located[i].shard].file->data() + from,
                    size);
      next_value += static_cast<std::int64_t>(lengths[c][i]);
    }
    std::memcpy(offsets + count * 8, &next_value, 8);
  }
  bytes_gathered += bytes;

  std::byte* base = host;
  if (cuda) {
    copy_stream->wait(*block->released);  // the consumer's work on the last batch here is done
    if (bytes)
      check_cuda(*cuda,
                 cuda->memcpy_async(block->device_memory, host, bytes, kCudaMemcpyHostToDevice,
                                    copy_stream->get()),
                 where, "cudaMemcpyAsync of a batch");
    block->copied->record(copy_stream->get());
    base = static_cast<std::byte*>(block->device_memory);
  }
  for (BatchColumn& column : columns) {
    column.data = at(base, column.data);
    if (column.column.variable_length())
      column.offsets = reinterpret_cast<std::int64_t*>(at(base, column.offsets));
  }
  block->epoch = job.order->options().epoch;
  block->index = job.index;
  block->rows = std::move(rows);
  block->columns = std::move(columns);
  block->bytes = bytes;
  return block;
}

}  // namespace detail

BatchStream::BatchStream(const Dataset& dataset, const StreamOptions& options)
    : state_(std::make_unique<detail::StreamState>()) {
  auto& s = *state_;
  s.dataset = dataset.state_;
  s.options = options;
  s.options.prefetch = std::max(1u, options.prefetch);
  if (options.stride == 0) throw Error("", "batch stream", "stride must be at least 1");
  const unsigned threads =
      gpucache::detail::resolve_thread_count(options.threads, detail::kDefaultLoadThreadCap);
  s.threads = threads;
  s.offset_positions = detail::positions_of(*s.dataset, {ColumnKind::text, ColumnKind::sequence});
  // A remote dataset's shards are fetched and mapped as the batches reach them (open_shard), a
  // local one's here.
  s.lazy = s.dataset->table->remote != nullptr;
  if (s.lazy)
    s.shards = detail::needed_shard_slots(*s.dataset);
  else
    s.shards = detail::map_needed_shards(*s.dataset, detail::ShardMapping::Access::read_only);
  s.ready = std::make_unique<std::atomic<bool>[]>(s.shards.size());
  s.opening = std::make_unique<std::mutex[]>(s.shards.size());
  for (std::size_t k = 0; k < s.shards.size(); ++k) s.ready[k].store(!s.lazy);
  // The offsets rule (never decreasing, within the values) before any value is read through them;
  // their hashes are checked per epoch like every other byte.
  if (!s.lazy) detail::check_offsets(*s.dataset, s.shards, s.offset_positions, false, threads);
  s.checks = std::make_unique<detail::ChunkChecks>(s.shards);
  if (options.device >= 0) {
    s.where = "cuda:" + std::to_string(options.device);
    s.cuda = &detail::require_cuda_api("the batch stream to " + s.where);
    int device_count = 0;
    detail::check_cuda(*s.cuda, s.cuda->get_device_count(&device_count), s.where,
                       "cudaGetDeviceCount");
    if (options.device >= device_count)
      throw Error("", s.where,
                  "no such device: this machine has " + std::to_string(device_count) + " GPU(s)");
    detail::DeviceScope scope(*s.cuda, options.device, s.where);
    s.copy_stream.emplace(*s.cuda, s.where);
  }
  s.pool = std::make_shared<detail::BlockPool>(s.cuda, options.device, s.options.prefetch);
  s.start_epoch(options.order.epoch, 0);
  for (unsigned t = 0; t < std::min<unsigned>(threads, s.options.prefetch); ++t)
    s.workers.emplace_back([&s] { s.work(); });
}

BatchStream::~BatchStream() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    state_->in_flight.clear();
  }
  state_->wake.notify_all();
  state_->wake_prefetcher.notify_all();
  for (auto& worker : state_->workers) worker.join();
  if (state_->prefetcher.joinable()) state_->prefetcher.join();
}

std::uint64_t BatchStream::batches() const noexcept {
  return state_->order->batches();
}
std::uint64_t BatchStream::epoch() const noexcept {
  return state_->epoch;
}
std::uint64_t BatchStream::position() const noexcept {
  return state_->next;
}

void BatchStream::seek(std::uint64_t epoch, std::uint64_t batch) {
  std::lock_guard lock(state_->mutex);
  state_->start_epoch(epoch, batch);
}

std::optional<Batch> BatchStream::next() {
  auto& s = *state_;
  std::unique_lock lock(s.mutex);
  if (s.next >= s.order->batches()) {
    s.start_epoch(s.epoch + 1, 0);
    return std::nullopt;
  }
  // The prefetcher starts with the first batch asked for and plans from the position of the
  // batches asked for: a stream created and then moved by seek (a resumed one) fetches nothing for
  // the position it was created at, and nothing is fetched for the epoch after the last one
  // iterated.
  if (s.lazy && s.options.prefetch_shards > 0) {
    if (!s.prefetcher.joinable()) s.prefetcher = std::thread([&s] { s.prefetch(); });
    if (s.asked != s.generation) {
      s.asked = s.generation;
      s.wake_prefetcher.notify_all();
    }
  }
  s.fill();
  const std::shared_ptr<detail::Job> job = s.in_flight.front();
  s.finished.wait(lock, [&] { return job->done; });
  s.in_flight.pop_front();
  if (job->error) {
    // The stream stays at this batch; a retry gathers it again.
    s.in_flight.clear();
    s.submitted = s.next;
    std::rethrow_exception(job->error);
  }
  s.next += s.options.stride;
  ++s.handed_out;
  s.fill();
  Batch batch;
  batch.block_ = job->block;
  return batch;
}

StreamStats BatchStream::stats() const {
  StreamStats stats;
  {
    std::lock_guard lock(state_->mutex);
    stats.batches = state_->handed_out;
  }
  stats.bytes_gathered = state_->bytes_gathered.load();
  stats.bytes_verified = state_->checks->bytes_verified();
  stats.peak_blocks = state_->pool->peak();
  for (std::size_t k = 0; k < state_->shards.size(); ++k)
    stats.shards_open += state_->ready[k].load(std::memory_order_acquire) ? 1 : 0;
  return stats;
}

std::uint64_t Batch::epoch() const noexcept {
  return block_->epoch;
}
std::uint64_t Batch::index() const noexcept {
  return block_->index;
}
std::uint64_t Batch::rows() const noexcept {
  return block_->rows.size();
}
const std::vector<std::uint64_t>& Batch::row_indices() const noexcept {
  return block_->rows;
}
int Batch::device() const noexcept {
  return block_->device;
}
const std::vector<BatchColumn>& Batch::columns() const noexcept {
  return block_->columns;
}
const BatchColumn& Batch::column(std::string_view name) const {
  for (const BatchColumn& column : block_->columns)
    if (column.column.name == name) return column;
  throw Error("", "column '" + std::string(name) + "'", "not in this stream's batches");
}

void Batch::wait(void* consumer_stream) const {
  if (!block_->cuda) return;
  const auto stream = static_cast<detail::cuda_stream_t>(consumer_stream);
  detail::check_cuda(*block_->cuda,
                     block_->cuda->stream_wait_event(stream, block_->copied->get(), 0),
                     "cuda:" + std::to_string(block_->device), "cudaStreamWaitEvent");
  block_->consumer = stream;
  block_->consumer_waited = true;
}

std::shared_ptr<const void> Batch::owner() const noexcept {
  return block_;
}

}  // namespace gpucache::runtime
