#include "pack_store.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <tuple>
#include <utility>

namespace gpucache::detail {
namespace {

// How far the copying thread of store_unchanged_rows has got, so the other thread, done hashing,
// can start the copied rows' writeback (the kernel's work of sending them to disk) meanwhile.
class CopyProgress {
 public:
  void advance(std::uint64_t rows) {
    {
      std::lock_guard lock(mutex_);
      rows_ = rows;
    }
    changed_.notify_one();
  }
  void finish() {
    {
      std::lock_guard lock(mutex_);
      finished_ = true;
    }
    changed_.notify_one();
  }
  std::uint64_t rows() {
    std::lock_guard lock(mutex_);
    return rows_;
  }
  // Rows copied, once more than `seen` are or copying has ended; and whether it has.
  std::pair<std::uint64_t, bool> wait_beyond(std::uint64_t seen) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return rows_ > seen || finished_; });
    return {rows_, finished_};
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t rows_ = 0;
  bool finished_ = false;
};

}  // namespace

BackgroundStore::~BackgroundStore() {
  if (pending_.valid()) pending_.wait();  // unwinding: the buffers must outlive the store
}

void BackgroundStore::store(std::uint64_t offset, std::span<const std::byte> bytes) {
  if (!enabled_) return builder_.store(column_, offset, bytes);
  finish();
  pending_ = std::async(std::launch::async,
                        [this, offset, bytes] { builder_.store(column_, offset, bytes); });
}

void BackgroundStore::write_rows(std::uint64_t offset, std::span<const std::byte* const> rows,
                                 std::uint64_t row_bytes) {
  if (!enabled_) return builder_.write_rows(column_, offset, rows, row_bytes);
  finish();
  pending_ = std::async(std::launch::async, [this, offset, rows, row_bytes] {
    builder_.write_rows(column_, offset, rows, row_bytes);
  });
}

void BackgroundStore::finish() {
  if (pending_.valid()) pending_.get();
}

void store_unchanged_rows(shard::ShardBuilder& builder, std::size_t column, std::uint64_t pitch,
                          const PackInputs& inputs, std::span<const std::uint64_t> rows,
                          unsigned threads) {
  // Runs are cut into pieces of about 32 MiB so that the copying thread reports progress as it
  // goes: the other thread starts the writeback of copied pieces while later ones are copied
  // (one run covering a whole input would otherwise leave all of the writeback to the end).
  const std::uint64_t piece_rows = std::max<std::uint64_t>(1, (std::uint64_t(32) << 20) / pitch);
  auto for_each_piece = [&](auto&& visit) {
    inputs.for_each_run(rows, [&](std::uint64_t offset, std::uint64_t first, std::uint64_t n) {
      for (std::uint64_t done = 0; done < n; done += piece_rows)
        visit(offset + done, first + done, std::min(piece_rows, n - done));
    });
  };
  auto copy = [&](std::uint64_t offset, std::uint64_t first, std::uint64_t n) {
    builder.write_stored(column, offset * pitch, {inputs.direct_rows(column, first, n), n * pitch});
  };
  auto hash = [&](std::uint64_t offset, std::uint64_t first, std::uint64_t n) {
    const std::byte* in = inputs.direct_rows(column, first, n);
    builder.hash_stored(column, offset * pitch, {in, n * pitch});
    inputs.release(column, first, n);
  };
  if (threads == 1) {
    for_each_piece([&](std::uint64_t offset, std::uint64_t first, std::uint64_t n) {
      copy(offset, first, n);
      hash(offset, first, n);
      builder.start_writeback(column, offset * pitch, n * pitch);
    });
    return;
  }
  CopyProgress progress;
  auto copying = std::async(std::launch::async, [&] {
    struct Finish {
      CopyProgress& progress;
      ~Finish() { progress.finish(); }
    } finish{progress};
    for_each_piece([&](std::uint64_t offset, std::uint64_t first, std::uint64_t n) {
      copy(offset, first, n);
      progress.advance(offset + n);
    });
  });
  std::uint64_t written_back = 0;
  auto write_back = [&](std::uint64_t copied) {
    if (copied > written_back)
      builder.start_writeback(column, written_back * pitch, (copied - written_back) * pitch);
    written_back = std::max(written_back, copied);
  };
  try {
    for_each_piece([&](std::uint64_t offset, std::uint64_t first, std::uint64_t n) {
      // A piece is hashed (and its input pages released) only once it is copied: released
      // before the copy, its pages came back when the copy read them and stayed resident, so a
      // pack of a 300 MiB mapped input held all 300 MiB (tests/test_hostile_inputs.cpp).
      progress.wait_beyond(offset + n - 1);
      hash(offset, first, n);
      write_back(progress.rows());
    });
    for (bool finished = false; !finished;) {
      std::uint64_t copied = 0;
      std::tie(copied, finished) = progress.wait_beyond(written_back);
      write_back(copied);
    }
  } catch (...) {
    copying.wait();
    throw;
  }
  copying.get();
}

}  // namespace gpucache::detail
