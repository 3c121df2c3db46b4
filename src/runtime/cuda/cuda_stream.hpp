// The CUDA state a load holds for its duration, as scopes that release it on every exit path and
// turn CUDA failures into gpucache::Error ("<where>: <call> failed: <CUDA's message>"):
// - DeviceScope: the load's device is current, and the caller's is restored afterwards;
// - CudaStream: a non-blocking stream that the copies of a destination are enqueued on;
// - CudaEvent: a marker on a stream, so memory that copies read (a staging buffer, a registered
//   mapping) is reused or released only once those copies have completed.
#pragma once

#include <string>

#include "cuda_api.hpp"

namespace gpucache::runtime::detail {

// Makes `device` current and restores the caller's device when it goes, so loading does not change
// what PyTorch or the application considers the current device.
class DeviceScope {
 public:
  DeviceScope(const CudaApi& cuda, int device, const std::string& where);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  const CudaApi& cuda_;
  int previous_ = -1;
};

class CudaEvent;

// A stream created with cudaStreamNonBlocking (it never waits for the legacy default stream).
// The destructor waits for the work enqueued on it before destroying it, so whatever that work
// reads or writes can be freed once the stream is gone: declare a stream after the memory its
// copies touch.
class CudaStream {
 public:
  CudaStream(const CudaApi& cuda, std::string where);
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cuda_stream_t get() const noexcept { return stream_; }
  // Blocks until every copy enqueued so far has completed.
  void synchronize() const;
  // Work enqueued on this stream from now on starts only after `event`'s last record completed.
  void wait(const CudaEvent& event) const;

 private:
  const CudaApi& cuda_;
  std::string where_;
  cuda_stream_t stream_ = nullptr;
};

// An event without timing. Movable, so rings of buffers can hold one each. Destroying it does not
// wait: synchronize first when the memory it fences is about to be reused.
class CudaEvent {
 public:
  CudaEvent(const CudaApi& cuda, std::string where);
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&&) = delete;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cuda_event_t get() const noexcept { return event_; }
  // Marks the point after everything enqueued on `stream` so far.
  void record(cuda_stream_t stream);
  // Blocks until the last record completed; returns at once when it was never recorded.
  void synchronize() const;
  // Whether the last record completed (true when it was never recorded); never blocks.
  bool completed() const;

 private:
  const CudaApi* cuda_;
  std::string where_;
  cuda_event_t event_ = nullptr;
};

}  // namespace gpucache::runtime::detail
