// Fetching one shard of a remote dataset into a local file, every byte once and every byte checked
// before the file takes its name: the header against the manifest's header_hash, the tables
// against the header's hashes, each chunk against its XXH3 as it arrives (raw chunks as stored,
// zstd chunks after decompression), then the whole layout (shard::decode_layout). A response
// that fails a check is fetched again (ObjectStore's retries); what cannot be fetched right is an
// error naming the URL and byte range, and the partial file is removed.
#pragma once

#include <cstdint>
#include <string>

#include "object_store.hpp"

namespace gpucache::remote::detail {

struct ShardSource {
  std::string name;  // shard-00000.gcs
  std::uint64_t bytes = 0;
  std::uint64_t header_hash = 0;
};

// Requests: [0, 4096), the rest of the header and tables when they pass 4096, the chunk table and
// footer, then the chunks in runs of adjacent ones of up to 32 MiB (one range each; a larger chunk
// alone), `connections` in flight.
void fetch_shard(ObjectStore& store, const ShardSource& shard, const std::string& path,
                 unsigned connections);

}  // namespace gpucache::remote::detail
