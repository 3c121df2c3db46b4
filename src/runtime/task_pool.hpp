// A small fixed-size thread pool for the loader's CPU work (chunk hashing, pread into staging):
// tasks run in submission order on up to N threads; the first exception a task throws is kept and
// rethrown by wait(), and tasks not yet started are skipped once one has failed.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpucache::runtime::detail {

// Eight threads hash faster than PCIe can copy; more only add contention on small machines.
inline constexpr unsigned kDefaultLoadThreadCap = 8;

class TaskPool {
 public:
  explicit TaskPool(unsigned threads);
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  void submit(std::function<void()> task);
  // Blocks until every submitted task has finished or been skipped; rethrows the first failure.
  void wait();
  bool failed() const;

 private:
  void work();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> queue_;
  std::size_t running_ = 0;
  bool stopping_ = false;
  std::exception_ptr failure_;
  std::vector<std::thread> threads_;
};

}  // namespace gpucache::runtime::detail
