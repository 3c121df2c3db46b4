// The one parallel loop and the one thread-count rule of gpucache's CPU work (hashing chunks,
// checking and converting row blocks, copying into staging buffers). Blocks are claimed
// dynamically, so uneven blocks balance; results never depend on the thread count because every
// block writes only its own output. Header-only and C++17, so the CUDA sources can use it too.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace gpucache::detail {

// `requested` threads, or for 0 one per hardware thread, at most `cap` (the runtime reader caps
// its default at 8: more threads than that only contend for memory bandwidth while loading).
inline unsigned resolve_thread_count(unsigned requested, unsigned cap = 0) noexcept {
  if (requested != 0) return requested;
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  return cap == 0 ? hardware : std::min(hardware, cap);
}

// Calls fn(begin, end) for consecutive blocks of `grain` items of [0, count) (the last one
// shorter) on up to `threads` threads (0: resolve_thread_count), the calling thread included.
// After the first exception no new block starts; it is rethrown once every thread has stopped.
template <class Fn>
void parallel_for(std::uint64_t count, unsigned threads, std::uint64_t grain, Fn&& fn) {
  if (count == 0) return;
  grain = std::max<std::uint64_t>(grain, 1);
  const std::uint64_t blocks = (count + grain - 1) / grain;
  const auto workers =
      static_cast<unsigned>(std::min<std::uint64_t>(resolve_thread_count(threads), blocks));
  if (workers <= 1) {
    for (std::uint64_t begin = 0; begin < count; begin += grain)
      fn(begin, std::min(count, begin + grain));
    return;
  }
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    try {
      for (std::uint64_t block;
           !failed.load(std::memory_order_relaxed) && (block = next.fetch_add(1)) < blocks;) {
        const std::uint64_t begin = block * grain;
        fn(begin, std::min(count, begin + grain));
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (unsigned t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (auto& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

// The same, one item at a time: body(i) for every i in [0, count).
template <class Body>
void parallel_for_each(std::uint64_t count, unsigned threads, Body&& body) {
  parallel_for(count, threads, 1, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t i = begin; i < end; ++i) body(i);
  });
}

}  // namespace gpucache::detail
