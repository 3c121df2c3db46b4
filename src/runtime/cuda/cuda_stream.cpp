#include "cuda_stream.hpp"

#include <utility>

namespace gpucache::runtime::detail {

DeviceScope::DeviceScope(const CudaApi& cuda, int device, const std::string& where) : cuda_(cuda) {
  cuda_.get_device(&previous_);
  check_cuda(cuda_, cuda_.set_device(device), where, "cudaSetDevice");
}

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) cuda_.set_device(previous_);
}

CudaStream::CudaStream(const CudaApi& cuda, std::string where)
    : cuda_(cuda), where_(std::move(where)) {
  check_cuda(cuda_, cuda_.stream_create_with_flags(&stream_, kCudaStreamNonBlocking), where_,
             "cudaStreamCreateWithFlags");
}

CudaStream::~CudaStream() {
  // Errors are ignored: a failed copy was reported where it was enqueued or synchronised.
  cuda_.stream_synchronize(stream_);
  cuda_.stream_destroy(stream_);
}

void CudaStream::synchronize() const {
  check_cuda(cuda_, cuda_.stream_synchronize(stream_), where_, "cudaStreamSynchronize");
}

void CudaStream::wait(const CudaEvent& event) const {
  check_cuda(cuda_, cuda_.stream_wait_event(stream_, event.get(), 0), where_,
             "cudaStreamWaitEvent");
}

CudaEvent::CudaEvent(const CudaApi& cuda, std::string where)
    : cuda_(&cuda), where_(std::move(where)) {
  check_cuda(*cuda_, cuda_->event_create_with_flags(&event_, kCudaEventDisableTiming), where_,
             "cudaEventCreateWithFlags");
}

CudaEvent::~CudaEvent() {
  if (event_) cuda_->event_destroy(event_);
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept
    : cuda_(other.cuda_),
      where_(std::move(other.where_)),
      event_(std::exchange(other.event_, nullptr)) {}

void CudaEvent::record(cuda_stream_t stream) {
  check_cuda(*cuda_, cuda_->event_record(event_, stream), where_, "cudaEventRecord");
}

void CudaEvent::synchronize() const {
  check_cuda(*cuda_, cuda_->event_synchronize(event_), where_, "cudaEventSynchronize");
}

bool CudaEvent::completed() const {
  const cuda_error_t status = cuda_->event_query(event_);
  if (status == kCudaErrorNotReady) return false;
  check_cuda(*cuda_, status, where_, "cudaEventQuery");
  return true;
}

}  // namespace gpucache::runtime::detail
