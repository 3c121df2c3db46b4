#include "host_registrations.hpp"

#include <unistd.h>

#include <algorithm>

#include "gpucache/error.hpp"

namespace gpucache::runtime::detail {

HostRegistrations::HostRegistrations(const CudaApi& cuda, cuda_stream_t stream, std::size_t window)
    : cuda_(cuda), stream_(stream), window_(window) {}

HostRegistrations::~HostRegistrations() {
  // An exception between add() and fence() may have left copies enqueued out of the newest group:
  // an event recorded now comes after them.
  for (auto& group : groups_)
    if (!group.fenced)
      group.fenced = cuda_.event_record(group.event.get(), stream_) == kCudaSuccess;
  while (!groups_.empty()) retire_oldest();
}

bool HostRegistrations::add(const std::byte* base, const std::vector<ByteRange>& ranges) {
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<ByteRange> pages;
  for (const auto& range : ranges) {
    if (range.begin >= range.end) continue;
    const ByteRange rounded{range.begin / page * page, (range.end + page - 1) / page * page};
    if (!pages.empty() && rounded.begin <= pages.back().end)
      pages.back().end = std::max(pages.back().end, rounded.end);
    else
      pages.push_back(rounded);
  }
  std::vector<void*> pointers;
  auto* writable = const_cast<std::byte*>(base);  // CUDA's signature; the flag says read-only
  for (const auto& range : pages) {
    if (cuda_.host_register(writable + range.begin, range.end - range.begin,
                            kCudaHostRegisterReadOnly | kCudaHostRegisterPortable) !=
        kCudaSuccess) {
      cuda_.get_last_error();  // clear it: the fallback source is about to use CUDA
      unregister(pointers);
      return false;
    }
    pointers.push_back(writable + range.begin);
  }
  try {
    groups_.push_back({pointers, CudaEvent(cuda_, "copy"), false});
  } catch (const Error&) {
    cuda_.get_last_error();
    unregister(pointers);
    return false;
  }
  return true;
}

void HostRegistrations::fence() {
  groups_.back().event.record(stream_);
  groups_.back().fenced = true;
  while (groups_.size() > window_) retire_oldest();
}

void HostRegistrations::unregister(const std::vector<void*>& pointers) noexcept {
  for (void* pointer : pointers) cuda_.host_unregister(pointer);
}

void HostRegistrations::retire_oldest() noexcept {
  Group& oldest = groups_.front();
  // A group whose event could not be recorded is unfenced: only the whole stream says its copies
  // are done.
  if (oldest.fenced)
    cuda_.event_synchronize(oldest.event.get());
  else
    cuda_.stream_synchronize(stream_);
  unregister(oldest.pointers);
  groups_.pop_front();
}

}  // namespace gpucache::runtime::detail
