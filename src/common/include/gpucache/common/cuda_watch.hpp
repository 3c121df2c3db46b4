// What gpucache's calls into CUDA are doing, for a GPU machine where something blocks. A call into
// the CUDA runtime may block for as long as the GPU or its driver takes (a synchronisation, an
// allocation that waits for the device, the first call that initialises the driver and creates the
// context, pinning memory); when it never returns, a silent hang is the worst outcome, and the
// process may not even be killable while it is inside the driver. So:
// - every such call is wrapped in a CudaCallWatch, and a watchdog thread (one per process, started
//   at the first watched call) prints one line on stderr for a call that has not returned after
//   cuda_report_after_seconds() (60 s by default, $GPUCACHE_CUDA_REPORT_AFTER seconds), naming the
//   call, its arguments and what gpucache was doing, then again at twice the time, and so on. It
//   reports; it never interrupts the call: a slow but healthy GPU must not fail a load;
// - with $GPUCACHE_DEBUG_CUDA set, every watched call and gpucache's CUDA steps are traced, one
//   line each, with the wall time, the process and the thread: "1" writes them to stderr, any
//   other value is a file they are appended to (so several processes, e.g. CTest's, can share one
//   and the lines survive a process that has to be killed).
// Header without CUDA types: the runtime's CudaApi wrappers (src/runtime/cuda/cuda_api.cpp), the
// validate module's kernels (a separate shared module with its own copy of this code) and the
// loaders of the CUDA runtime and of the kernels use it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace gpucache {

// Whether $GPUCACHE_DEBUG_CUDA asks for a trace (read once per process).
bool cuda_debug_enabled() noexcept;
// One line of trace (printf format, no newline), when enabled.
void cuda_debug(const char* format, ...) noexcept __attribute__((format(printf, 1, 2)));

// Seconds after which a watched call that has not returned is reported.
double cuda_report_after_seconds() noexcept;

// Watches one call into CUDA for as long as it lives: declare it right before the call, in the
// scope that ends right after it. The description (printf format) names the call, its arguments
// and its purpose. No allocation; the text is cut at 200 bytes.
class CudaCallWatch {
 public:
  explicit CudaCallWatch(const char* format, ...) noexcept __attribute__((format(printf, 2, 3)));
  ~CudaCallWatch();
  CudaCallWatch(const CudaCallWatch&) = delete;
  CudaCallWatch& operator=(const CudaCallWatch&) = delete;
  // Adds the call's result to the trace's closing line ("= 0" by default: not given).
  void result(int status) noexcept { status_ = status; }

 private:
  friend struct CudaWatchRegistry;
  char text_[200];
  std::chrono::steady_clock::time_point started_;
  double next_report_ = 0;        // seconds since started_; guarded by the registry's mutex
  std::uint64_t generation_ = 0;  // the registry's when linked (a fork in a child starts anew)
  bool reported_ = false;
  int status_ = 0;
  long thread_ = 0;
  CudaCallWatch* prev_ = nullptr;
  CudaCallWatch* next_ = nullptr;
};

// The same as a call with a watch around it: returns what `call` returns.
template <class Call>
auto watched_call(const char* what, Call&& call) {
  CudaCallWatch watch("%s", what);
  auto status = call();
  watch.result(static_cast<int>(status));
  return status;
}

namespace detail {
// For tests: reports go to `sink` (each line without its newline) instead of stderr, after
// `seconds`; a null sink restores stderr and the default threshold.
void set_cuda_watch_for_testing(double seconds, std::function<void(std::string_view)> sink);
// For tests: trace lines go to `sink` (tracing on) or, with a null sink, back to what
// $GPUCACHE_DEBUG_CUDA says.
void set_cuda_debug_for_testing(std::function<void(std::string_view)> sink);
}  // namespace detail

}  // namespace gpucache
