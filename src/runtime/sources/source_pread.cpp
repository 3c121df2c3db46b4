#include "source_pread.hpp"

#include "window_copy.hpp"

namespace gpucache::runtime::detail {

std::size_t PreadSource::deliver(std::span<const ShardCopies> shards, Destination& destination,
                                 LoadStats& stats) {
  stats.bytes_verified += copy_windows(shards, destination, options_, WindowRead::pread);
  stats.shards_staged += static_cast<std::uint32_t>(shards.size());
  return shards.size();
}

}  // namespace gpucache::runtime::detail
