// How pack moves rows into a shard beside the work that produces them: converted blocks are
// stored (written and hashed) on a second thread while the next is converted, and f32 rows that
// need no conversion are copied file to file inside the kernel while another thread hashes them.
#pragma once

#include <cstdint>
#include <future>
#include <span>

#include "gpucache/shard_io/shard_writer.hpp"
#include "pack_inputs.hpp"

namespace gpucache::detail {

// Stores one block at a time on a thread of its own while the caller prepares the next; or on the
// caller's thread when only one thread may be used.
class BackgroundStore {
 public:
  BackgroundStore(shard::ShardBuilder& builder, std::size_t column, bool enabled)
      : builder_(builder), column_(column), enabled_(enabled) {}
  ~BackgroundStore();
  BackgroundStore(const BackgroundStore&) = delete;
  BackgroundStore& operator=(const BackgroundStore&) = delete;
  // Waits for the previous block, whose buffer the caller may then reuse, and starts this one.
  void store(std::uint64_t offset, std::span<const std::byte> bytes);
  // Waits for the previous block and starts writing this one, rows lying apart (ShardBuilder::
  // write_rows): the caller hashes them meanwhile (hash_rows) and keeps `rows` until the next call.
  void write_rows(std::uint64_t offset, std::span<const std::byte* const> rows,
                  std::uint64_t row_bytes);
  // Waits for the last block; rethrows what storing it threw.
  void finish();

 private:
  shard::ShardBuilder& builder_;
  std::size_t column_;
  bool enabled_;
  std::future<void> pending_;
};

// Stores rows that need no conversion, all lying in mapped input files (PackInputs::direct_rows
// for every run): copied from the input file to the shard file inside the kernel, as cp does,
// while another thread hashes them from the input mapping and starts their writeback as they are
// copied. `pitch` is the column's row pitch, equal to the rows' size.
void store_unchanged_rows(shard::ShardBuilder& builder, std::size_t column, std::uint64_t pitch,
                          const PackInputs& inputs, std::span<const std::uint64_t> rows,
                          unsigned threads);

}  // namespace gpucache::detail
