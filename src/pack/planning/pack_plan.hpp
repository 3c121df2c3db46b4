// What a pack run will write, decided before any byte is: the output columns, and which output
// rows go into which shard.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gpucache/pack.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard_io/shard_writer.hpp"
#include "pack_inputs.hpp"

namespace gpucache::detail {

// The input columns with their storage types and padding, then the provenance columns
// `@source` and `@source_row` (shard::kSourceColumn, kSourceRowColumn).
std::vector<Column> output_columns(const Source& source, const PackOptions& options);

struct ShardPlan {
  std::uint64_t first = 0;  // first output row
  std::uint64_t rows = 0;
  // Per column, the bytes of values its rows hold in a text or sequence column (0 for tensor
  // columns): summed once while planning, then what the shard's ShardBuilder and the output
  // budget take.
  std::vector<std::uint64_t> value_bytes;
};

// The smallest row count whose bytes are a whole number of 4096-byte pages in every tensor
// column (text columns do not count): lcm over columns of 4096 / gcd(row pitch, 4096).
std::uint64_t aligned_rows_quantum(const std::vector<Column>& specs);

// Splits the output rows into shards within shard_size bytes and shard_rows rows; a shard always
// takes at least one row. Without shard_rows, a shard that is cut early holds a multiple of
// aligned_rows_quantum rows whenever the budget fits one (SPEC.md, "Rows per shard").
// done_with(first, count), when given, is told of each range of `rows` planning no longer reads
// (the caller releases those pages: pack's row list may live in a file).
std::vector<ShardPlan> plan_shards(
    const std::vector<Column>& specs, const PackInputs& inputs, std::span<const std::uint64_t> rows,
    const PackOptions& options,
    const std::function<void(std::uint64_t first, std::uint64_t count)>& done_with = {});

// What a resumed run must agree on with the interrupted one: inputs (by content hash), options
// and where every shard starts and ends.
std::string plan_text(const shard::Manifest& manifest, const std::vector<ShardPlan>& plans);

}  // namespace gpucache::detail
