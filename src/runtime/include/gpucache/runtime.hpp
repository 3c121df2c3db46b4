// The runtime reader: opens a packed dataset (src/shard/SPEC.md) and hands its columns to
// training code, either as zero-copy views into the memory-mapped shards or uploaded to a GPU in
// one allocation. Built as its own small library (libgpucache_runtime) that depends only on the
// C++ standard library, POSIX, xxHash and libzstd (for compressed shards); the CUDA runtime is
// loaded with dlopen on first use, so the same build works on machines without a GPU. It parses no
// JSON: manifest.json is left to the caller (the Python layer reads it).
//
// Every function reports failure by throwing gpucache::Error naming the file, where in it and why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpucache/api.hpp"
#include "gpucache/column.hpp"
#include "gpucache/dtype.hpp"
#include "gpucache/error.hpp"

namespace gpucache::runtime {

class BatchStream;

namespace detail {
struct DatasetState;
struct HostState;
struct DeviceState;
}  // namespace detail

// A column's description (gpucache/column.hpp): name, kind, dtype, row shape, padding.
using gpucache::Column;
using gpucache::ColumnKind;

struct ShardInfo {
  std::string path;
  // The shard's position and first row in the dataset, as manifest.json lists it (a merged or
  // appended dataset's headers count within their segment: src/shard/SPEC.md, "Segments").
  std::uint32_t shard_index = 0;
  std::uint64_t first_row = 0;
  std::uint64_t rows = 0;
  std::uint64_t file_size = 0;
  std::uint64_t header_hash = 0;  // manifest.json records this value for every shard
};

// One shard's part of a host column: `rows` consecutive rows starting at row `first_row` of the
// selection.
// - Tensor columns: `data` points at the rows, row_pitch_bytes() apart; each row is
//   [*row_shape] row-major with its innermost dimension stored as padded_dim elements.
// - Text and sequence columns: `data` points at the shard's u64 offsets of these rows (rows + 1
//   of them), which count values (bytes for text) from `values`: row i is values [offsets[i],
//   offsets[i + 1]). They are the shard's own offsets, so offsets[0] is 0 only when the piece
//   starts at the shard's first row. Checked before the load returned, even without verify.
struct HostPiece {
  const std::byte* data = nullptr;
  std::uint64_t rows = 0;
  std::uint64_t first_row = 0;
  std::uint32_t shard_index = 0;
  const std::byte* text_bytes = nullptr;  // text columns: the UTF-8 bytes (equals `values`)
  const std::byte* values = nullptr;      // text and sequence columns: the shard's values
};

// An address range of one shard's memory map, so callers (and tests) can check that a view
// really points into the mapping.
struct MappedRange {
  const std::byte* data = nullptr;
  std::size_t size = 0;
  std::string path;
};

struct HostOptions {
  bool verify = true;    // hash every chunk the selection touches before returning
  unsigned threads = 0;  // hashing threads; 0 = min(hardware threads, 8)
};

// What a load did (HostData::stats, DeviceData::stats).
struct LoadStats {
  std::uint64_t bytes_copied = 0;
  std::uint64_t bytes_verified = 0;
  std::uint32_t shards_registered = 0;  // uploaded straight from the registered mapping
  // Copied by CPU threads: read with pread through the staging ring or, for host_pinned, from the
  // mapping.
  std::uint32_t shards_staged = 0;
  double seconds = 0;
};

// Host data: zero-copy views into the memory-mapped shards. Copies of HostData share the mappings,
// which stay alive while any copy (or any owner() token) does.
class GPUCACHE_API HostData {
 public:
  std::uint64_t rows() const noexcept;
  const std::vector<Column>& columns() const noexcept;
  const Column& column(std::string_view name) const;
  // One piece per shard the selection touches, in row order.
  std::span<const HostPiece> pieces(std::string_view column) const;
  // A tensor column's selected rows as one contiguous array of rows × row_pitch_bytes() bytes
  // ([rows, *row_shape] with the innermost dimension stored as padded_dim), without a copy: the
  // shard's view when the rows lie in one shard; across shards, their parts mapped side by side
  // when they meet on page boundaries (what gpucache pack writes unless --shard-rows says
  // otherwise), whatever the row pitch. nullptr when they could not be joined (then use
  // pieces()), and for text and sequence columns.
  const std::byte* joined(std::string_view column) const;
  // Row `row` of the selection of a text or sequence column: its values (UTF-8 bytes for text;
  // size() / dtype size values of the column's dtype for a sequence) inside the mapping.
  std::span<const std::byte> row_values(std::string_view column, std::uint64_t row) const;
  // Row `row` of the selection of a text column, as UTF-8 bytes pointing into the mapping.
  std::string_view text(std::string_view column, std::uint64_t row) const;
  std::vector<MappedRange> mapped_ranges() const;
  // A token that keeps every mapping alive; hand it to whatever wraps the views (DLPack owners).
  std::shared_ptr<const void> owner() const noexcept;
  // What to_host did: bytes_verified (chunks hashed) and seconds; nothing is copied.
  const LoadStats& stats() const noexcept;

 private:
  friend class Dataset;
  std::shared_ptr<const detail::HostState> state_;
};

// The codes are the C ABI's GPUCACHE_PLACEMENT_* (gpucache.h).
enum class Placement : std::uint8_t {
  device = 0,       // one cudaMalloc on the GPU
  host_pinned = 1,  // one pinned, device-mapped host allocation that kernels read over PCIe
};
// The one spelling of each placement ("device", "host_pinned": Python's placement=, messages).
GPUCACHE_API std::string_view placement_name(Placement placement) noexcept;
// The placement of a name or of a C ABI code; nullopt for anything else.
GPUCACHE_API std::optional<Placement> parse_placement(std::string_view name) noexcept;
GPUCACHE_API std::optional<Placement> placement_from_code(int code) noexcept;
// Every placement, in code order.
GPUCACHE_API std::span<const Placement> placements() noexcept;
// "device, host_pinned": the names, for messages.
GPUCACHE_API std::string placement_names();

// placement="auto" (Python's gpucache.load; the one rule): a selection whose device allocation is
// `needed` bytes goes to the device when needed + placement_margin(total) <= free, else into
// pinned host memory. The margin is 10% of the card, at least 1 GiB: room for the model, its
// activations and the allocator's fragmentation. `reason` gives the numbers and the outcome.
struct PlacementChoice {
  Placement placement = Placement::device;
  std::string reason;
};
GPUCACHE_API std::uint64_t placement_margin(std::uint64_t total_bytes) noexcept;
GPUCACHE_API PlacementChoice choose_placement(std::uint64_t needed_bytes, std::uint64_t free_bytes,
                                              std::uint64_t total_bytes, std::string_view where);

enum class ReadMode : std::uint8_t {
  automatic = 0,      // register the mapping as pinned memory; fall back to pread when that fails
  register_mmap = 1,  // only the registered-mapping path; failure to register is an error
  pread = 2,          // only parallel pread into a pinned staging ring (network file systems)
};

struct DeviceOptions {
  Placement placement = Placement::device;
  ReadMode read_mode = ReadMode::automatic;
  bool verify = true;
  unsigned threads = 0;                     // 0 = min(hardware threads, 8)
  std::size_t staging_bytes = 16ull << 20;  // per staging buffer (raised to the chunk size)
};

// A column in the one allocation of a device load.
struct DeviceColumn {
  Column column;
  // Tensor columns: the [rows, *row_shape] rows, row_pitch_bytes() apart (the innermost dimension
  // stored as padded_dim elements, as in the shards). Sequence columns: the selected rows' values
  // back to back, `values` elements of the column's dtype. Device-accessible.
  void* data = nullptr;
  std::uint64_t offset = 0;  // of `data` in the allocation (a multiple of 4096)
  std::uint64_t bytes = 0;   // at `data`: rows × row_pitch_bytes, or values × dtype size
  // Sequence columns: rows + 1 int64 offsets into `data`, rebased to the selection: row i is
  // values [offsets[i], offsets[i + 1]), offsets[0] = 0, offsets[rows] = values. Device-accessible.
  std::int64_t* offsets = nullptr;
  std::uint64_t offsets_offset = 0;  // of `offsets` in the allocation (a multiple of 4096)
  std::uint64_t values = 0;
};

// The tensor and sequence columns of a selection in one allocation: each tensor column's rows from
// every shard are contiguous, so it is one [rows, *row_shape] tensor (innermost dimension stored
// as padded_dim); a sequence column is its values, contiguous across shards, plus int64 offsets
// rebased to the selection (computed on the host from the checked shard offsets). The allocation is
// freed (or the pinned host memory released) when the last copy of DeviceData and the last owner()
// token die.
class GPUCACHE_API DeviceData {
 public:
  int device() const noexcept;
  Placement placement() const noexcept;
  std::uint64_t rows() const noexcept;
  std::uint64_t bytes() const noexcept;  // size of the allocation
  const std::vector<DeviceColumn>& columns() const noexcept;
  const DeviceColumn& column(std::string_view name) const;
  const LoadStats& stats() const noexcept;
  std::shared_ptr<const void> owner() const noexcept;

 private:
  friend class Dataset;
  std::shared_ptr<const detail::DeviceState> state_;
};

// Where a remote dataset's fetched shards are kept (docs/remote.md). Ignored for local paths.
struct OpenOptions {
  // Empty: GPUCACHE_CACHE, else a temporary folder removed when the last Dataset value (and every
  // load made from it) is gone.
  std::string cache_dir;
  std::uint64_t cache_limit_bytes = 0;  // 0: GPUCACHE_CACHE_LIMIT ("50G"), else no limit
};

// A dataset and a selection of its columns and rows. Opening a directory reads only manifest.json
// (its hash checked): the shard list there says which shard holds which rows. A shard is mapped,
// and its header and tables checked against the manifest's record of it, by to_host/to_device,
// and only when the selection needs rows from it: a rank's slice of 100,000 shards opens in the
// time it takes to parse the manifest. Selections return new, cheap Dataset values.
class GPUCACHE_API Dataset {
 public:
  // `path` is a dataset directory (manifest.json and the shard-*.gcs files it lists; files it
  // does not list are ignored, as during an append) or a single .gcs shard. Compressed shards
  // are decompressed when loaded (each needed shard into private memory laid out like its mapping).
  // A reader keeps the shard set it opened: files of an append made after open are not seen, and
  // old shards are never rewritten (src/shard/SPEC.md, "Segments").
  static Dataset open(const std::string& path);
  // `path` may also be a remote dataset, `s3://BUCKET/PREFIX` or `http(s)://HOST/PATH`
  // (docs/remote.md): opening fetches its manifest.json (never a LIST request); the shards a load
  // needs are fetched into the cache folder first, each chunk checked against its hash on arrival.
  static Dataset open(const std::string& path, const OpenOptions& options);

  const std::string& path() const noexcept;
  // The folder (or shard file) the data is read from: path() itself, or for a remote dataset the
  // cache folder holding its manifest.json and the shards fetched so far.
  const std::string& local_path() const noexcept;
  std::uint64_t total_rows() const noexcept;  // rows in the whole dataset
  std::uint64_t row_begin() const noexcept;   // the selection is rows [row_begin, row_end)
  std::uint64_t row_end() const noexcept;
  std::uint64_t rows() const noexcept { return row_end() - row_begin(); }
  const std::vector<Column>& all_columns() const noexcept;
  const std::vector<Column>& columns() const noexcept;  // the selected ones
  const std::vector<ShardInfo>& shards() const noexcept;
  // Indices into shards() of the shards the selection needs.
  std::vector<std::size_t> needed_shards() const;
  // An upper bound of to_device's allocation for this selection, without mapping a shard (exact
  // for tensor columns; sequence columns counted with the needed shards' sizes).
  std::uint64_t device_bytes_bound() const;

  // Keeps only the named columns, in the order given. Unknown or repeated names are errors.
  Dataset select_columns(const std::vector<std::string>& names) const;
  // Rows [begin, end) of the current selection (relative to it).
  Dataset select_rows(std::uint64_t begin, std::uint64_t end) const;
  // Rank `rank` of `world_size` gets rows [rank × n, (rank + 1) × n) of the current selection with
  // n = rows() / world_size: every rank gets the same count and the last rows() % world_size rows
  // are dropped, so DDP ranks step in lockstep.
  Dataset for_rank(std::uint32_t rank, std::uint32_t world_size) const;
  // Rank `rank`'s contiguous share keeping every row: the first rows() % world_size ranks get one
  // row more than the others (rows() / world_size), so the shares cover the selection once.
  Dataset share_for_rank(std::uint32_t rank, std::uint32_t world_size) const;

  HostData to_host(const HostOptions& options = {}) const;
  // Uploads the selected tensor and sequence columns (text columns stay on the host; use to_host
  // for them). Sequence offsets are checked (hashed first with verify) before the allocation is
  // sized from them. Checks free device memory first: "needs X GiB, Y GiB free on cuda:N".
  DeviceData to_device(int device, const DeviceOptions& options = {}) const;

 private:
  friend class BatchStream;  // gpucache/batch_stream.hpp
  explicit Dataset(std::shared_ptr<const detail::DatasetState> state) : state_(std::move(state)) {}
  std::shared_ptr<const detail::DatasetState> state_;
};

// True when the CUDA runtime library can be loaded and reports at least one device.
GPUCACHE_API bool cuda_available() noexcept;
// Which libcudart was loaded ("" when none): libcudart.so.13, .12 or the GPUCACHE_CUDART override.
GPUCACHE_API std::string cuda_library() noexcept;

}  // namespace gpucache::runtime
