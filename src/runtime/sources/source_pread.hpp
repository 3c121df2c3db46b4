// Parallel pread into a ring of reused staging buffers as the source: for network file systems,
// where mapping is slow or can fault, and for shards CUDA refuses to register. Worker threads read
// windows of whole chunks (window_copy.hpp), hash them in the buffer and write them on; for a
// destination with a stream the buffers are pinned and reused only once their copies completed.
#pragma once

#include "sources.hpp"

namespace gpucache::runtime::detail {

class PreadSource final : public Source {
 public:
  explicit PreadSource(SourceOptions options) : options_(std::move(options)) {}

  std::size_t deliver(std::span<const ShardCopies> shards, Destination& destination,
                      LoadStats& stats) override;

 private:
  SourceOptions options_;
};

}  // namespace gpucache::runtime::detail
