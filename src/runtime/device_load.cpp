// Dataset::to_device: one allocation for every selected tensor column, laid out column by column,
// filled either straight from the mapping registered as pinned memory (one cudaMemcpyAsync per
// shard and column) or, where registering fails, through the staged pread path; chunk hashes are
// checked on CPU threads while the copies run.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>

#include "cuda_api.hpp"
#include "gpucache/common/parallel.hpp"
#include "load_plan.hpp"
#include "staged_reader.hpp"

namespace gpucache::runtime {
namespace detail {

struct DeviceState {
  const CudaApi* cuda = nullptr;
  int device = 0;
  Placement placement = Placement::device;
  void* allocation = nullptr;  // cudaMalloc'd, or cudaHostAlloc'd for host_pinned
  std::byte* device_base = nullptr;
  std::uint64_t bytes = 0;
  std::uint64_t rows = 0;
  std::vector<DeviceColumn> columns;
  LoadStats stats;

  DeviceState() = default;
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;
  ~DeviceState() {
    if (!allocation) return;
    // Errors are ignored: at interpreter exit the CUDA runtime may already be unloading.
    int previous = -1;
    cuda->get_device(&previous);
    cuda->set_device(device);
    if (placement == Placement::device)
      cuda->free(allocation);
    else
      cuda->free_host(allocation);
    if (previous >= 0) cuda->set_device(previous);
    cuda->get_last_error();
  }
};

namespace {

std::string gib(std::uint64_t bytes) {
  const double value = static_cast<double>(bytes) / (1ull << 30);
  char text[32];
  // Two decimals for real sizes; small ones keep three significant digits instead of "0.00".
  std::snprintf(text, sizeof text, value >= 0.1 || bytes == 0 ? "%.2f" : "%.3g", value);
  return text;
}

// Makes `device` current for the load and restores the caller's device afterwards, so loading
// does not change what PyTorch or the application considers the current device.
class DeviceScope {
 public:
  DeviceScope(const CudaApi& cuda, int device, const std::string& where) : cuda_(cuda) {
    cuda_.get_device(&previous_);
    check_cuda(cuda_, cuda_.set_device(device), where, "cudaSetDevice");
  }
  ~DeviceScope() {
    if (previous_ >= 0) cuda_.set_device(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  const CudaApi& cuda_;
  int previous_ = -1;
};

// The copy stream. Destroyed first on every exit path, and it waits for the copies before it goes,
// so nothing they read (registered mappings, staging) or write (the allocation) is freed under
// them.
class CopyStream {
 public:
  CopyStream(const CudaApi& cuda, const std::string& where) : cuda_(cuda) {
    check_cuda(cuda_, cuda_.stream_create_with_flags(&stream_, kCudaStreamNonBlocking), where,
               "cudaStreamCreateWithFlags");
  }
  ~CopyStream() {
    cuda_.stream_synchronize(stream_);
    cuda_.stream_destroy(stream_);
  }
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;
  cuda_stream_t get() const { return stream_; }
  void synchronize(const std::string& where) const {
    check_cuda(cuda_, cuda_.stream_synchronize(stream_), where, "cudaStreamSynchronize");
  }

 private:
  const CudaApi& cuda_;
  cuda_stream_t stream_ = nullptr;
};

// Page-locked parts of the mappings, at most a few shards at a time so the whole dataset is never
// pinned at once; unregistered once the copies out of them are done.
class Registrations {
 public:
  explicit Registrations(const CudaApi& cuda) : cuda_(cuda) {}
  ~Registrations() {
    while (!shards_.empty()) retire_oldest();
  }
  Registrations(const Registrations&) = delete;
  Registrations& operator=(const Registrations&) = delete;

  // Registers the pages under `copies`; false (with nothing left registered) when CUDA refuses.
  bool add(const MappedShard& shard, const std::vector<CopyItem>& copies) {
    static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    std::vector<ByteRange> pages;
    for (const auto& copy : copies) {
      if (copy.bytes == 0) continue;
      const ByteRange range{copy.source / page * page,
                            (copy.source + copy.bytes + page - 1) / page * page};
      if (!pages.empty() && range.begin <= pages.back().end)
        pages.back().end = std::max(pages.back().end, range.end);
      else
        pages.push_back(range);
    }
    Shard registered;
    auto* base = const_cast<std::byte*>(shard.file->data());
    for (const auto& range : pages) {
      if (cuda_.host_register(base + range.begin, range.end - range.begin,
                              kCudaHostRegisterReadOnly | kCudaHostRegisterPortable) !=
          kCudaSuccess) {
        cuda_.get_last_error();  // clear it: the fallback path is about to use CUDA
        for (void* pointer : registered.pointers) cuda_.host_unregister(pointer);
        return false;
      }
      registered.pointers.push_back(base + range.begin);
    }
    if (cuda_.event_create_with_flags(&registered.event, kCudaEventDisableTiming) != kCudaSuccess) {
      for (void* pointer : registered.pointers) cuda_.host_unregister(pointer);
      cuda_.get_last_error();
      return false;
    }
    shards_.push_back(std::move(registered));
    return true;
  }

  // After the shard's copies are enqueued: fences them and retires the oldest shards beyond the
  // window.
  void enqueued(cuda_stream_t stream, std::size_t window) {
    check_cuda(cuda_, cuda_.event_record(shards_.back().event, stream), "copy", "cudaEventRecord");
    while (shards_.size() > window) retire_oldest();
  }

 private:
  struct Shard {
    std::vector<void*> pointers;
    cuda_event_t event = nullptr;
  };
  void retire_oldest() {
    Shard& oldest = shards_.front();
    cuda_.event_synchronize(oldest.event);
    cuda_.event_destroy(oldest.event);
    for (void* pointer : oldest.pointers) cuda_.host_unregister(pointer);
    shards_.pop_front();
  }

  const CudaApi& cuda_;
  std::deque<Shard> shards_;
};

}  // namespace
}  // namespace detail

DeviceData Dataset::to_device(int device, const DeviceOptions& options) const {
  using namespace detail;
  const auto started = std::chrono::steady_clock::now();
  const DatasetState& state = *state_;
  const std::string where = "cuda:" + std::to_string(device);
  const CudaApi& cuda = require_cuda_api(where);
  int device_count = 0;
  check_cuda(cuda, cuda.get_device_count(&device_count), where, "cudaGetDeviceCount");
  if (device < 0 || device >= device_count)
    throw Error("", where,
                "no such device: this machine has " + std::to_string(device_count) + " GPU(s)");
  DeviceScope scope(cuda, device, where);

  // Column-major layout: each column's rows from every shard in one aligned region.
  auto result = std::make_shared<DeviceState>();
  result->cuda = &cuda;
  result->device = device;
  result->placement = options.placement;
  result->rows = rows();
  std::vector<std::size_t> tensor_positions;
  for (std::size_t c = 0; c < state.columns.size(); ++c) {
    if (state.columns[c].kind != ColumnKind::tensor) continue;
    DeviceColumn column;
    column.column = state.columns[c];
    column.offset = shard::align_up(result->bytes, shard::kAlignment);
    column.bytes = result->rows * column.column.row_pitch_bytes();
    result->bytes = column.offset + column.bytes;
    result->columns.push_back(column);
    tensor_positions.push_back(c);
  }

  if (options.placement == Placement::device) {
    std::size_t free_bytes = 0, total_bytes = 0;
    check_cuda(cuda, cuda.mem_get_info(&free_bytes, &total_bytes), where, "cudaMemGetInfo");
    if (result->bytes > free_bytes)
      throw Error(path(), where,
                  "needs " + gib(result->bytes) + " GiB, " + gib(free_bytes) + " GiB free on " +
                      where + "; select fewer columns or rows, or use placement host_pinned");
  }
  if (result->bytes > 0) {
    if (options.placement == Placement::device) {
      check_cuda(cuda, cuda.malloc(&result->allocation, result->bytes), where,
                 "cudaMalloc of " + gib(result->bytes) + " GiB");
      result->device_base = static_cast<std::byte*>(result->allocation);
    } else {
      check_cuda(cuda,
                 cuda.host_alloc(&result->allocation, result->bytes,
                                 kCudaHostAllocPortable | kCudaHostAllocMapped),
                 where, "cudaHostAlloc of " + gib(result->bytes) + " GiB of pinned host memory");
      void* device_pointer = nullptr;
      check_cuda(cuda, cuda.host_get_device_pointer(&device_pointer, result->allocation, 0), where,
                 "cudaHostGetDevicePointer");
      result->device_base = static_cast<std::byte*>(device_pointer);
    }
  }
  for (auto& column : result->columns) column.data = result->device_base + column.offset;

  const std::vector<MappedShard> shards = map_needed_shards(state, ShardMapping::Access::read_only);
  std::vector<std::vector<CopyItem>> copies(shards.size());
  for (std::size_t s = 0; s < shards.size(); ++s) {
    for (std::size_t t = 0; t < tensor_positions.size(); ++t) {
      const ByteRange range = column_rows_range(state, shards[s], tensor_positions[t]);
      const auto& column = result->columns[t];
      copies[s].push_back({range.begin,
                           column.offset + shards[s].out_row * column.column.row_pitch_bytes(),
                           range.end - range.begin});
      result->stats.bytes_copied += range.end - range.begin;
    }
    std::sort(copies[s].begin(), copies[s].end(),
              [](const CopyItem& a, const CopyItem& b) { return a.source < b.source; });
  }

  const unsigned threads = gpucache::detail::resolve_thread_count(options.threads, kDefaultLoadThreadCap);
  StagedOptions staged_options;
  staged_options.verify = options.verify;
  staged_options.threads = threads;
  staged_options.staging_bytes = options.staging_bytes;
  std::vector<StagedShard> staged;

  if (options.placement == Placement::host_pinned) {
    // Pinned host memory is filled by the CPU: from the mapping, or with pread when asked to.
    staged_options.read_with_pread = options.read_mode == ReadMode::pread;
    staged_options.target = static_cast<std::byte*>(result->allocation);
    for (std::size_t s = 0; s < shards.size(); ++s) staged.push_back({&shards[s], copies[s]});
    const auto staged_result = run_staged(staged, staged_options);
    result->stats.bytes_verified = staged_result.bytes_verified;
    result->stats.shards_staged = static_cast<std::uint32_t>(shards.size());
  } else {
    Registrations registrations(cuda);
    CopyStream stream(cuda, where);
    TaskPool hashing(options.verify ? threads : 1);
    std::vector<std::vector<std::uint64_t>> verified(shards.size());
    bool registering = options.read_mode != ReadMode::pread;
    for (std::size_t s = 0; s < shards.size(); ++s) {
      if (hashing.failed()) hashing.wait();  // a corrupt chunk: stop uploading, report it
      std::vector<ByteRange> ranges;
      for (const auto& copy : copies[s]) ranges.push_back({copy.source, copy.source + copy.bytes});
      if (registering) {
        advise_will_need(shards[s], ranges);
        registering = registrations.add(shards[s], copies[s]);
        if (!registering && options.read_mode == ReadMode::register_mmap)
          throw Error(shards[s].file->path(), where,
                      "cudaHostRegister of the mapped shard failed (read_mode register_mmap "
                      "allows no fallback)");
      }
      if (!registering) {
        staged.push_back({&shards[s], copies[s]});
        continue;
      }
      for (const auto& copy : copies[s]) {
        if (copy.bytes == 0) continue;
        check_cuda(cuda,
                   cuda.memcpy_async(result->device_base + copy.destination,
                                     shards[s].file->data() + copy.source, copy.bytes,
                                     kCudaMemcpyHostToDevice, stream.get()),
                   shards[s].file->path(),
                   "cudaMemcpyAsync of " + std::to_string(copy.bytes) + " bytes");
      }
      // Two shards stay registered: one being copied while the next one is paged in and pinned.
      registrations.enqueued(stream.get(), 2);
      if (options.verify)
        result->stats.bytes_verified +=
            submit_chunk_checks(hashing, shards[s], ranges, verified[s]);
      ++result->stats.shards_registered;
    }
    if (!staged.empty()) {
      staged_options.read_with_pread = true;
      staged_options.cuda = &cuda;
      staged_options.stream = stream.get();
      staged_options.target = result->device_base;
      const auto staged_result = run_staged(staged, staged_options);
      result->stats.bytes_verified += staged_result.bytes_verified;
      result->stats.shards_staged = static_cast<std::uint32_t>(staged.size());
    }
    stream.synchronize(where);
    hashing.wait();
  }
  result->stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  DeviceData data;
  data.state_ = std::move(result);
  return data;
}

int DeviceData::device() const noexcept {
  return state_->device;
}
Placement DeviceData::placement() const noexcept {
  return state_->placement;
}
std::uint64_t DeviceData::rows() const noexcept {
  return state_->rows;
}
std::uint64_t DeviceData::bytes() const noexcept {
  return state_->bytes;
}
const std::vector<DeviceColumn>& DeviceData::columns() const noexcept {
  return state_->columns;
}
const LoadStats& DeviceData::stats() const noexcept {
  return state_->stats;
}
std::shared_ptr<const void> DeviceData::owner() const noexcept {
  return state_;
}

const DeviceColumn& DeviceData::column(std::string_view name) const {
  for (const auto& column : state_->columns)
    if (column.column.name == name) return column;
  throw Error("", "column '" + std::string(name) + "'", "not among the uploaded tensor columns");
}

bool cuda_available() noexcept {
  const detail::CudaApi* cuda = detail::load_cuda_api();
  int count = 0;
  return cuda && cuda->get_device_count(&count) == detail::kCudaSuccess && count > 0;
}

std::string cuda_library() noexcept {
  const detail::CudaApi* cuda = detail::load_cuda_api();
  return cuda ? cuda->library : std::string();
}

}  // namespace gpucache::runtime
