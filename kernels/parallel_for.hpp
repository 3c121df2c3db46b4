// Splits a range of independent items over a few threads. Header-only and C++17, so the CPU
// reference and the CUDA staging code (built into a separate library) can both use it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace gpucache::detail {

inline unsigned resolve_thread_count(unsigned requested) {
  if (requested != 0) return requested;
  return std::max(1u, std::thread::hardware_concurrency());
}

// Runs fn(begin, end) over contiguous parts of [0, count), each at least `grain` items long
// (except a shorter whole range), on at most `threads` threads, the first part on the calling
// thread. The first exception thrown by any part is rethrown after all parts have finished.
template <class Fn>
void parallel_for(std::uint64_t count, unsigned threads, std::uint64_t grain, Fn&& fn) {
  if (count == 0) return;
  const std::uint64_t by_grain =
      std::max<std::uint64_t>(1, count / std::max<std::uint64_t>(grain, 1));
  const auto parts =
      static_cast<unsigned>(std::min<std::uint64_t>(std::max(threads, 1u), by_grain));
  if (parts <= 1) {
    fn(std::uint64_t{0}, count);
    return;
  }
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto run = [&](unsigned part) {
    const std::uint64_t begin = count * part / parts, end = count * (part + 1) / parts;
    try {
      fn(begin, end);
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  workers.reserve(parts - 1);
  for (unsigned part = 1; part < parts; ++part) workers.emplace_back(run, part);
  run(0);
  for (auto& worker : workers) worker.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace gpucache::detail
