// The shard's memory mapping as the source. For a destination that copies on a CUDA stream, each
// shard's pages under its copies are registered as pinned memory (HostRegistrations: two shards
// stay registered, one being copied while the next is paged in and pinned) and written straight
// from the mapping, one write per shard and column, while CPU threads hash the chunks under them.
// When CUDA refuses to register a shard, deliver() stops before it (OnRefusal::stop, so the caller
// hands the rest to PreadSource) or throws (OnRefusal::fail). For a destination the CPU writes,
// nothing needs pinning: worker threads copy windows of the mapping (window_copy.hpp); those
// shards count as staged, as host_pinned loads always have.
#pragma once

#include "sources.hpp"

namespace gpucache::runtime::detail {

class MappedSource final : public Source {
 public:
  enum class OnRefusal { stop, fail };
  MappedSource(SourceOptions options, OnRefusal on_refusal)
      : options_(std::move(options)), on_refusal_(on_refusal) {}

  std::size_t deliver(std::span<const ShardCopies> shards, Destination& destination,
                      LoadStats& stats) override;

 private:
  SourceOptions options_;
  OnRefusal on_refusal_;
};

}  // namespace gpucache::runtime::detail
