// Pass 2 of pack: fills one shard's columns from the kept rows, in output order. Embedding
// columns are gathered as f32 and converted (CPU or CUDA) straight into the padded shard rows;
// an f64 embedding kept as f64 is copied and padded as it is, or normalised in f64 on the host.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "gpucache/progress.hpp"
#include "gpucache/shard_io/shard_writer.hpp"
#include "gpucache/validate.hpp"
#include "pack_inputs.hpp"

namespace gpucache::detail {

// converters[c] converts embedding column c; null for columns copied as they are. Advances
// `progress` by the shard's rows once per input column filled.
ConversionCounts fill_shard(shard::ShardBuilder& builder, const std::vector<Column>& specs,
                            const PackInputs& inputs, std::span<const std::uint64_t> rows,
                            std::vector<std::unique_ptr<RowConverter>>& converters,
                            unsigned threads, Progress& progress);

}  // namespace gpucache::detail
