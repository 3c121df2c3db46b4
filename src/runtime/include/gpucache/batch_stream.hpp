// The batch stream: batches of a dataset too large to keep whole in VRAM (or on the host), read
// from the memory-mapped shards as they are needed. Reader threads gather each batch's rows (in
// the order of gpucache/batch_order.hpp) into a staging block; for a GPU, the block is pinned and
// copied to a device block on the stream's own CUDA stream, and the consumer's stream waits on an
// event (no host synchronisation per batch). `prefetch` batches are gathered ahead. Every chunk a
// batch reads is hash-checked once per epoch before the batch is handed out.
//
// Memory: at most prefetch batches in flight, plus those the consumer still holds; each costs its
// bytes once on the host (pinned for a GPU) and once in VRAM for a GPU. Blocks are reused.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "gpucache/api.hpp"
#include "gpucache/batch_order.hpp"
#include "gpucache/runtime.hpp"

namespace gpucache::runtime {

namespace detail {
struct StreamState;
struct BatchBlock;
}  // namespace detail

struct StreamOptions {
  // The order: batch_size, shuffle, seed, rank, world_size, drop_last, block_rows, window_blocks
  // (rows and epoch are the stream's own). Ranks share the dataset: rank r takes its interleaved
  // part of each epoch's global order.
  OrderOptions order;
  int device = -1;        // -1: batches stay in host memory; else the CUDA device
  unsigned prefetch = 4;  // batches gathered ahead (at least 1)
  // A remote dataset (s3://, http(s)://): its shards are fetched and mapped as batches reach them,
  // and a background thread fetches the next ones, in the order the epoch's batches first use
  // them, up to this many past the furthest shard a gathered batch has reached (0: none ahead;
  // each shard is fetched when a batch first needs it). A local dataset's shards are all mapped
  // when the stream opens and this is unused. See docs/remote.md "Streaming".
  unsigned prefetch_shards = 2;
  unsigned threads = 0;  // reader threads; 0 = min(hardware threads, 8)
  bool verify = true;    // hash every chunk once per epoch before its rows are handed out
  // Hands out every stride-th batch from the position seek() chose: `stride` DataLoader workers,
  // each seeking to its own first batch, share an epoch without reading each other's batches.
  std::uint64_t stride = 1;
};

// One column of a batch, in the batch's block (host memory, or device memory for a GPU stream).
// Tensor columns: rows × row_pitch_bytes() bytes at `data`, the stored rows. Text and sequence
// columns: `values` values (bytes for text) at `data`, and rows + 1 int64 `offsets` from 0: row i
// is values [offsets[i], offsets[i + 1]).
struct BatchColumn {
  Column column;
  std::byte* data = nullptr;
  std::uint64_t bytes = 0;
  std::int64_t* offsets = nullptr;
  std::uint64_t values = 0;
};

class GPUCACHE_API Batch {
 public:
  std::uint64_t epoch() const noexcept;
  std::uint64_t index() const noexcept;  // of the batch in its epoch
  std::uint64_t rows() const noexcept;
  // The rows (of the dataset selection) the batch holds, in order; on the host.
  const std::vector<std::uint64_t>& row_indices() const noexcept;
  int device() const noexcept;  // -1 for host batches
  const std::vector<BatchColumn>& columns() const noexcept;
  const BatchColumn& column(std::string_view name) const;
  // GPU batches: makes work enqueued on `consumer_stream` (a cudaStream_t; nullptr the legacy
  // default stream) after this call wait for the batch's copy, without blocking the host. Once the
  // batch and every owner() token are gone, the block is reused only after the work enqueued on
  // that stream so far has completed. Host batches: nothing to do.
  void wait(void* consumer_stream) const;
  // Keeps the batch's memory; the block returns to the stream when the last holder goes.
  std::shared_ptr<const void> owner() const noexcept;

 private:
  friend class BatchStream;
  std::shared_ptr<detail::BatchBlock> block_;
};

struct StreamStats {
  std::uint64_t batches = 0;         // handed out
  std::uint64_t bytes_gathered = 0;  // into staging blocks
  std::uint64_t bytes_verified = 0;  // chunks hashed (each once per epoch)
  std::uint64_t peak_blocks = 0;     // most batch blocks alive at once (the memory bound)
  std::uint64_t shards_open = 0;     // of the selection's shards, mapped (a remote one: fetched)
};

class GPUCACHE_API BatchStream {
 public:
  // Maps the selection's shards and checks the offsets of its text and sequence columns (a
  // remote dataset's shards: as batches reach them, fetched ahead by prefetch_shards). Throws
  // gpucache::Error for a bad order or an unusable device.
  BatchStream(const Dataset& dataset, const StreamOptions& options);
  ~BatchStream();
  BatchStream(const BatchStream&) = delete;
  BatchStream& operator=(const BatchStream&) = delete;

  std::uint64_t batches() const noexcept;   // per epoch, for this rank
  std::uint64_t epoch() const noexcept;     // of the next batch
  std::uint64_t position() const noexcept;  // index of the next batch in its epoch
  // Where the next batch comes from: batch `batch` of epoch `epoch` (batch <= batches()). Drops
  // what was prefetched.
  void seek(std::uint64_t epoch, std::uint64_t batch);
  // The next batch of the epoch (stride batches after the previous one); none at its end, after
  // which the stream stands at batch 0 of the next epoch. Throws the first read, hash or CUDA error
  // (the stream is then at that batch).
  std::optional<Batch> next();
  StreamStats stats() const;

 private:
  std::unique_ptr<detail::StreamState> state_;
};

}  // namespace gpucache::runtime
