// A minimal parallel loop for CPU work split into independent items (chunks to hash, row blocks
// to convert). Items are claimed dynamically so uneven items balance; results never depend on the
// thread count because every item writes only its own output.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace gpucache::detail {

inline unsigned default_thread_count() noexcept {
  return std::max(1u, std::thread::hardware_concurrency());
}

// Calls body(i) for every i in [0, count) on up to `threads` threads (0 = all cores). The first
// exception thrown by any call is rethrown on the calling thread after all threads stop.
template <typename Body>
void parallel_for(std::uint64_t count, unsigned threads, Body&& body) {
  if (threads == 0) threads = default_thread_count();
  threads = static_cast<unsigned>(std::min<std::uint64_t>(threads, count));
  if (threads <= 1) {
    for (std::uint64_t i = 0; i < count; ++i) body(i);
    return;
  }
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    try {
      for (std::uint64_t i;
           !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < count;)
        body(i);
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace gpucache::detail
