// Dataset::to_device: a plan (which bytes, in what order, verified how: load_plan.hpp), a
// destination for the placement (destination_device.hpp, destination_pinned_host.hpp) and the
// sources the read mode names (sources.hpp), composed; and the DeviceData that keeps the result.
// Sequence columns add one step: their offsets, rebased to the selection, are computed on the host
// and written to the front of the allocation before the sources deliver the values.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cuda_stream.hpp"
#include "destination_device.hpp"
#include "destination_pinned_host.hpp"
#include "gpucache/common/cuda_watch.hpp"
#include "gpucache/common/parallel.hpp"
#include "load_plan.hpp"
#include "sources.hpp"

namespace gpucache::runtime {
namespace detail {

struct DeviceState {
  std::shared_ptr<const void> memory;  // the allocation, released when the last owner goes
  int device = 0;
  Placement placement = Placement::device;
  std::uint64_t bytes = 0;
  std::uint64_t rows = 0;
  std::vector<DeviceColumn> columns;
  LoadStats stats;
};

namespace {

void require_device(const CudaApi& cuda, int device, const std::string& where) {
  int device_count = 0;
  check_cuda(cuda, cuda.get_device_count(&device_count), where, "cudaGetDeviceCount");
  if (device < 0 || device >= device_count)
    throw Error("", where,
                "no such device: this machine has " + std::to_string(device_count) + " GPU(s)");
}

std::unique_ptr<AllocationDestination> allocate_destination(const CudaApi& cuda,
                                                            Placement placement, int device,
                                                            std::uint64_t bytes,
                                                            const std::string& dataset_path,
                                                            const std::string& where) {
  if (placement == Placement::host_pinned)
    return std::make_unique<PinnedHostDestination>(cuda, device, bytes, where);
  return std::make_unique<DeviceDestination>(cuda, device, bytes, dataset_path, where);
}

// Host memory for bytes the host computes before they go to the destination (the rebased sequence
// offsets): pinned when the destination copies on a stream, which reads only pinned memory.
class HostImage {
 public:
  HostImage(const CudaApi& cuda, Placement placement, int device, std::uint64_t bytes,
            const std::string& where) {
    if (bytes == 0) return;
    if (placement == Placement::host_pinned) {
      plain_.resize(bytes);
      data_ = plain_.data();
      return;
    }
    void* pointer = nullptr;
    check_cuda(cuda, cuda.host_alloc(&pointer, bytes, kCudaHostAllocPortable), where,
               "cudaHostAlloc of " + gib(bytes) + " GiB for sequence offsets");
    pinned_ = std::make_unique<CudaAllocation>(cuda, device, pointer, &CudaApi::free_host);
    data_ = pinned_->data();
  }
  std::byte* data() const noexcept { return data_; }

 private:
  std::vector<std::byte> plain_;
  std::unique_ptr<CudaAllocation> pinned_;
  std::byte* data_ = nullptr;
};

}  // namespace
}  // namespace detail

DeviceData Dataset::to_device(int device, const DeviceOptions& options) const {
  using namespace detail;
  const auto started = std::chrono::steady_clock::now();
  const std::string where = "cuda:" + std::to_string(device);
  const CudaApi& cuda = require_cuda_api(where);
  cuda_debug("%s: to_device of %s, placement %d, read mode %d", where.c_str(), path().c_str(),
             static_cast<int>(options.placement), static_cast<int>(options.read_mode));
  require_device(cuda, device, where);
  DeviceScope scope(cuda, device, where);

  // The shards come first: a sequence column's size depends on its offsets, which must be
  // trusted (hashed, then checked against the format's rule) before anything is derived from them.
  std::vector<MappedShard> shards = map_needed_shards(*state_, ShardMapping::Access::read_only);
  const unsigned threads =
      gpucache::detail::resolve_thread_count(options.threads, kDefaultLoadThreadCap);
  const CheckedOffsets checked = check_offsets(
      *state_, shards, positions_of(*state_, {ColumnKind::sequence}), options.verify, threads);
  const DeviceLayout layout = plan_device_layout(*state_, shards);
  // Declared before the destination, whose stream waits for the copy out of it when it goes.
  const HostImage offsets(cuda, options.placement, device, layout.offsets_bytes, where);
  const auto destination =
      allocate_destination(cuda, options.placement, device, layout.bytes, path(), where);
  fill_sequence_offsets(*state_, shards, layout, offsets.data(), threads);
  // The plan takes the mappings after the destination exists, so they go first should anything
  // throw: sources return only once no copy reads them, the destination's stream waits for the
  // copies into it.
  const CopyPlan plan = plan_copies(*state_, std::move(shards), layout, options);
  if (layout.offsets_bytes > 0) destination->write(0, offsets.data(), layout.offsets_bytes, path());
  LoadStats stats = deliver_plan(plan, options.read_mode, *destination, cuda, where);
  destination->finish();
  cuda_debug("%s: to_device of %s done", where.c_str(), path().c_str());
  stats.bytes_copied = plan.bytes_copied + layout.offsets_bytes;
  stats.bytes_verified += checked.bytes_verified;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  auto result = std::make_shared<DeviceState>();
  result->memory = destination->memory();
  result->device = device;
  result->placement = options.placement;
  result->bytes = layout.bytes;
  result->rows = rows();
  result->columns = layout.columns;
  for (auto& column : result->columns) {
    column.data = destination->device_base() + column.offset;
    if (column.column.kind == ColumnKind::sequence)
      column.offsets =
          reinterpret_cast<std::int64_t*>(destination->device_base() + column.offsets_offset);
  }
  result->stats = stats;
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

namespace {
// The one list of placements and their names.
constexpr std::pair<Placement, std::string_view> kPlacements[] = {
    {Placement::device, "device"},
    {Placement::host_pinned, "host_pinned"},
};
constexpr Placement kPlacementValues[] = {Placement::device, Placement::host_pinned};
static_assert(std::size(kPlacementValues) == std::size(kPlacements));
}  // namespace

std::span<const Placement> placements() noexcept {
  return kPlacementValues;
}

std::string_view placement_name(Placement placement) noexcept {
  for (const auto& [value, name] : kPlacements)
    if (value == placement) return name;
  return "unknown";
}

std::optional<Placement> parse_placement(std::string_view name) noexcept {
  for (const auto& [value, known] : kPlacements)
    if (known == name) return value;
  return std::nullopt;
}

std::optional<Placement> placement_from_code(int code) noexcept {
  for (const auto& [value, name] : kPlacements)
    if (static_cast<int>(value) == code) return value;
  return std::nullopt;
}

std::uint64_t placement_margin(std::uint64_t total_bytes) noexcept {
  return std::max<std::uint64_t>(std::uint64_t{1} << 30, total_bytes / 10);
}

PlacementChoice choose_placement(std::uint64_t needed_bytes, std::uint64_t free_bytes,
                                 std::uint64_t total_bytes, std::string_view where) {
  const std::uint64_t margin = placement_margin(total_bytes);
  const auto gib = [](std::uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", static_cast<double>(bytes) / (1ull << 30));
    return std::string(text);
  };
  std::string numbers = "needs " + gib(needed_bytes) + " GiB, " + gib(free_bytes) +
                        " GiB free on " + std::string(where) + ", margin " + gib(margin) + " GiB";
  // Compared without the sum overflowing: needed + margin <= free.
  if (needed_bytes <= free_bytes && margin <= free_bytes - needed_bytes)
    return {Placement::device, numbers + ": resident in VRAM"};
  return {Placement::host_pinned,
          numbers +
              ": does not fit, kept in pinned host memory that kernels read over PCIe "
              "(gpucache.stream copies batches to VRAM instead)"};
}

std::string placement_names() {
  std::string text;
  for (const auto& [value, name] : kPlacements) {
    if (!text.empty()) text += ", ";
    text += name;
  }
  return text;
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
  throw Error("", "column '" + std::string(name) + "'",
              "not among the uploaded tensor and sequence columns");
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
