#include "task_pool.hpp"

#include <algorithm>

namespace gpucache::runtime::detail {

TaskPool::TaskPool(unsigned threads) {
  threads_.reserve(threads);
  for (unsigned i = 0; i < std::max(threads, 1u); ++i) threads_.emplace_back([this] { work(); });
}

TaskPool::~TaskPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  for (auto& thread : threads_) thread.join();
}

void TaskPool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    if (failure_) return;
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void TaskPool::wait() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
  if (failure_) std::rethrow_exception(failure_);
}

bool TaskPool::failed() const {
  std::lock_guard lock(mutex_);
  return failure_ != nullptr;
}

void TaskPool::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    auto task = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    std::exception_ptr error;
    try {
      task();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    --running_;
    if (error && !failure_) {
      failure_ = error;
      queue_.clear();
    }
    if (queue_.empty() && running_ == 0) idle_.notify_all();
  }
}

}  // namespace gpucache::runtime::detail
