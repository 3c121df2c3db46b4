#include "source_mapped.hpp"

#include "gpucache/error.hpp"
#include "host_registrations.hpp"
#include "task_pool.hpp"
#include "window_copy.hpp"

namespace gpucache::runtime::detail {

std::size_t MappedSource::deliver(std::span<const ShardCopies> shards, Destination& destination,
                                  LoadStats& stats) {
  if (!destination.stream()) {
    stats.bytes_verified += copy_windows(shards, destination, options_, WindowRead::in_place);
    stats.shards_staged += static_cast<std::uint32_t>(shards.size());
    return shards.size();
  }
  HostRegistrations registrations(*options_.cuda, destination.stream(), 2);
  TaskPool hashing(options_.verify ? options_.threads : 1);  // after registrations: stops first
  std::size_t delivered = 0;
  for (const ShardCopies& planned : shards) {
    if (hashing.failed()) hashing.wait();  // a corrupt chunk: stop copying, report it
    const MappedShard& shard = *planned.shard;
    const std::vector<ByteRange> ranges = source_ranges(planned);
    advise_will_need(shard, ranges);
    if (!registrations.add(shard.file->data(), ranges)) {
      if (on_refusal_ == OnRefusal::fail)
        throw Error(shard.file->path(), options_.where,
                    "cudaHostRegister of the mapped shard failed (read_mode register_mmap "
                    "allows no fallback)");
      break;
    }
    for (const CopyItem& copy : planned.copies)
      if (copy.bytes > 0)
        destination.write(copy.destination, shard.file->data() + copy.source, copy.bytes,
                          shard.file->path());
    registrations.fence();
    if (options_.verify) {
      std::vector<std::uint64_t> verified;  // a shard's chunks are all submitted at once
      stats.bytes_verified += submit_chunk_checks(hashing, shard, ranges, verified);
    }
    ++stats.shards_registered;
    ++delivered;
  }
  hashing.wait();
  return delivered;
}

}  // namespace gpucache::runtime::detail
