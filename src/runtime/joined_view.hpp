// One tensor column's selected rows from several shards as one contiguous, zero-copy array.
// Each shard's part of the column is mapped again, from the same file, at consecutive addresses
// of one reserved range (MAP_FIXED). That works when the parts meet on page boundaries: every
// part but the first starts on a page and every part but the last ends on one, which gpucache
// pack arranges by cutting full shards at a multiple of the aligned-rows quantum (SPEC.md, "Rows
// per shard"). Otherwise callers fall back to the per-shard pieces.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "chunk_verify.hpp"
#include "dataset_state.hpp"

namespace gpucache::runtime::detail {

class JoinedView {
 public:
  // `ranges[s]` is the column's byte range in shards[s]. Returns nullptr when the parts do not
  // meet on page boundaries, when a shard file was replaced since it was mapped, or when the
  // kernel refuses a mapping; never throws for those.
  static std::unique_ptr<JoinedView> map(const std::vector<MappedShard>& shards,
                                         const std::vector<ByteRange>& ranges);
  ~JoinedView();
  JoinedView(const JoinedView&) = delete;
  JoinedView& operator=(const JoinedView&) = delete;

  const std::byte* data() const noexcept { return base_ + lead_; }

 private:
  JoinedView(std::byte* base, std::size_t size, std::size_t lead)
      : base_(base), size_(size), lead_(lead) {}
  std::byte* base_;
  std::size_t size_;  // the whole reservation, a multiple of the page size
  std::size_t lead_;  // where the first selected row lies in the first page
};

}  // namespace gpucache::runtime::detail
