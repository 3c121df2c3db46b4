#include "shard_fetch.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "gpucache/common/atomic_file.hpp"
#include "gpucache/common/hash.hpp"
#include "gpucache/error.hpp"
#include "gpucache/shard/chunk_table.hpp"
#include "gpucache/shard/chunks.hpp"
#include "gpucache/shard/shard_layout.hpp"

namespace gpucache::remote::detail {
namespace {

using gpucache::detail::xxh3_64;

// The most bytes of adjacent chunks asked for in one range request: few requests per shard (each
// is billed, and throttled stores count them), yet several in flight for a large shard, and a
// failed check re-fetches at most this much.
constexpr std::uint64_t kRangeBytes = 32ull << 20;

std::uint64_t load_u64(const std::byte* at) {
  std::uint64_t value;
  std::memcpy(&value, at, sizeof value);  // the format is little-endian, as is every supported host
  return value;
}

std::string hex(std::uint64_t value) {
  return gpucache::detail::hex64(value);
}

// The format requires zeros between the tables and the data, and between the data and the chunk
// table; no hash covers them, so a byte damaged there is caught here: bytes [begin, end) of the
// file, of which `part` holds those from offset 0 (head) on, clipped to what it holds.
std::optional<std::string> nonzero_gap(std::span<const std::byte> part, std::uint64_t begin,
                                       std::uint64_t end, std::uint64_t part_offset = 0) {
  const std::uint64_t from = std::max(begin, part_offset);
  const std::uint64_t to = std::min(end, part_offset + part.size());
  for (std::uint64_t at = from; at < to; ++at)
    if (part[at - part_offset] != std::byte{0})
      return "byte " + std::to_string(at) + " must be zero (a gap of the layout) but is not";
  return std::nullopt;
}

// Why the first bytes of a shard are not the header the manifest recorded; nothing when they are.
std::optional<std::string> check_head(std::span<const std::byte> head, const ShardSource& shard,
                                      const std::string& url) {
  shard::Header header;
  try {
    header = shard::decode_header(head, url);
  } catch (const Error& error) {
    return error.cause();
  }
  if (header.header_hash != shard.header_hash)
    return "header hash " + hex(header.header_hash) + " differs from " + hex(shard.header_hash) +
           " in manifest.json";
  if (header.file_size != shard.bytes)
    return "header says " + std::to_string(header.file_size) + " bytes, manifest.json " +
           std::to_string(shard.bytes);
  const auto tables = shard::column_tables_size(header);
  if (!tables || header.data_offset < shard::kHeaderSize + *tables ||
      header.data_offset > shard.bytes)
    return "data_offset " + std::to_string(header.data_offset) + " is out of place";
  if (shard::kHeaderSize + *tables <= head.size() &&
      xxh3_64(head.subspan(shard::kHeaderSize, *tables)) != header.columns_hash)
    return "column table hash mismatch";
  return nonzero_gap(head, shard::kHeaderSize + *tables, header.data_offset);
}

}  // namespace

void fetch_shard(ObjectStore& store, const ShardSource& shard, const std::string& path,
                 unsigned connections) {
  const std::string url = store.url_of(shard.name);
  if (shard.bytes < shard::kHeaderSize + shard::kFooterSize)
    throw Error(url, "",
                "manifest.json lists " + std::to_string(shard.bytes) +
                    " bytes, less than a shard's header and footer");
  HttpSession session;
  gpucache::detail::AtomicFile out(path, gpucache::detail::Durability::unflushed);
  out.preallocate(shard.bytes);

  // Header and tables: the data region starts on a page boundary, so [0, 4096) never overlaps a
  // chunk and holds the header and the tables of up to 29 columns.
  const std::uint64_t head_end = std::min<std::uint64_t>(shard.bytes, shard::kAlignment);
  std::vector<std::byte> head =
      *store.get(session, shard.name, ByteSpan{0, head_end},
                 [&](std::span<const std::byte> body) { return check_head(body, shard, url); });
  const shard::Header header = shard::decode_header(head, url);
  const std::uint64_t tables_end = shard::kHeaderSize + *shard::column_tables_size(header);
  if (header.data_offset > head_end) {
    std::vector<std::byte> rest = *store.get(
        session, shard.name, ByteSpan{head_end, header.data_offset},
        [&](std::span<const std::byte> body) -> std::optional<std::string> {
          std::vector<std::byte> whole(head);
          whole.insert(whole.end(), body.begin(), body.end());
          if (xxh3_64(std::span(whole).subspan(
                  shard::kHeaderSize, tables_end - shard::kHeaderSize)) != header.columns_hash)
            return "column table hash mismatch";
          return nonzero_gap(whole, tables_end, header.data_offset);
        });
    head.insert(head.end(), rest.begin(), rest.end());
  }
  out.write_at(0, std::span(head).first(std::min<std::uint64_t>(head.size(), header.data_offset)));

  // Chunk table and footer: everything after the stored data.
  const std::uint64_t data_end = header.data_offset + header.stored_data_size;
  const std::uint64_t table_bytes = header.chunk_count * shard::kChunkEntrySize;
  if (data_end > shard.bytes || header.chunk_table_offset < data_end ||
      header.chunk_table_offset + table_bytes + shard::kFooterSize != shard.bytes)
    throw Error(url, "header", "the data region and chunk table do not fit the file size");
  const std::vector<std::byte> tail = *store.get(
      session, shard.name, ByteSpan{data_end, shard.bytes},
      [&](std::span<const std::byte> body) -> std::optional<std::string> {
        const auto table = body.subspan(header.chunk_table_offset - data_end, table_bytes);
        if (xxh3_64(table) != header.chunks_hash) return "chunk table hash mismatch";
        const auto footer = body.last(shard::kFooterSize);
        if (std::memcmp(footer.data(), shard::kFooterMagic.data(), shard::kFooterMagic.size()) !=
                0 ||
            load_u64(footer.data() + 24) != xxh3_64(footer.first(24)))
          return "the footer is damaged";
        if (load_u64(footer.data() + 8) != shard.bytes ||
            load_u64(footer.data() + 16) != header.header_hash)
          return "footer disagrees with the header";
        return nonzero_gap(body, data_end, header.chunk_table_offset, data_end);
      });
  const std::vector<shard::ChunkEntry> chunks = shard::decode_chunk_table(
      std::span(tail).subspan(header.chunk_table_offset - data_end, table_bytes), header, url);
  out.write_at(data_end, tail);

  // Chunks, in runs of adjacent chunks of up to kRangeBytes (one range request each, so a shard
  // of many small chunks costs few requests), `connections` in flight; every chunk of a run checked
  // against its hash before the run is written.
  shard::Layout layout;  // for chunk errors that name what a chunk holds
  layout.header = header;
  layout.columns = shard::decode_columns(
      std::span(head).subspan(shard::kHeaderSize, tables_end - shard::kHeaderSize), header, url);
  layout.chunks = chunks;
  struct Run {
    std::size_t first = 0, last = 0;  // chunks [first, last)
    std::uint64_t begin = 0, end = 0;
  };
  std::vector<Run> runs;
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    const std::uint64_t begin = chunks[k].stored_offset, end = begin + chunks[k].stored_size;
    if (!runs.empty() && runs.back().end == begin && end - runs.back().begin <= kRangeBytes) {
      runs.back().last = k + 1;
      runs.back().end = end;
    } else {
      runs.push_back({k, k + 1, begin, end});
    }
  }
  const auto check_chunk = [&](std::size_t k,
                               std::span<const std::byte> stored) -> std::optional<std::string> {
    const shard::ChunkEntry& chunk = chunks[k];
    std::uint64_t hash = 0;
    if (chunk.codec == shard::Codec::raw) {
      hash = xxh3_64(stored);
    } else {
      std::vector<std::byte> plain(shard::chunk_logical_size(header, k));
      if (auto cause = shard::decompress_chunk(stored, plain))
        return "chunk " + std::to_string(k) + ": " + *cause;
      hash = xxh3_64(plain);
    }
    if (hash != chunk.hash)
      return "chunk " + std::to_string(k) + " (" +
             shard::describe_range(layout, shard::chunk_range(header, k)) + ") hashes to " +
             hex(hash) + ", the chunk table says " + hex(chunk.hash);
    return std::nullopt;
  };
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  const auto work = [&](HttpSession& own) {
    try {
      for (std::size_t r = next++; r < runs.size() && !failed; r = next++) {
        const Run& run = runs[r];
        const auto body = *store.get(
            own, shard.name, ByteSpan{run.begin, run.end},
            [&](std::span<const std::byte> stored) -> std::optional<std::string> {
              for (std::size_t k = run.first; k < run.last; ++k)
                if (auto cause = check_chunk(k, stored.subspan(chunks[k].stored_offset - run.begin,
                                                               chunks[k].stored_size)))
                  return cause;
              return std::nullopt;
            });
        out.write_at(run.begin, body);
      }
    } catch (...) {
      failed = true;
      const std::lock_guard lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
    }
  };
  const unsigned helpers = static_cast<unsigned>(std::min<std::size_t>(connections, runs.size())) -
                           (runs.empty() ? 0 : 1);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < helpers; ++t)
    threads.emplace_back([&] {
      try {
        HttpSession own;
        work(own);
      } catch (...) {
        failed = true;
        const std::lock_guard lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
      }
    });
  work(session);
  for (auto& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);

  // The assembled file must be a whole, valid shard before it takes its name.
  void* mapping = ::mmap(nullptr, shard.bytes, PROT_READ, MAP_SHARED, out.descriptor(), 0);
  if (mapping == MAP_FAILED)
    throw Error(path, "", std::string("cannot map the fetched shard: ") + std::strerror(errno));
  try {
    shard::decode_layout({static_cast<const std::byte*>(mapping), shard.bytes}, url);
  } catch (...) {
    ::munmap(mapping, shard.bytes);
    throw;
  }
  ::munmap(mapping, shard.bytes);
  out.commit();
}

}  // namespace gpucache::remote::detail
