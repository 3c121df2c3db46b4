// What probe_text and probe_json both need: grouping a container's elements by structure, and the
// mapping attempt with its failure reason.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpucache/probe.hpp"

namespace gpucache::detail {

struct ElementVariant {
  std::string signature;  // value_signature of the elements, without nested list lengths
  std::uint64_t count = 0;
  std::uint64_t first_index = 0;
};

// Elements grouped by signature, most frequent first (ties: first seen first). Reads no tensor
// data.
std::vector<ElementVariant> group_elements(const std::vector<const Value*>& elements);

std::vector<const Value*> list_elements(const List& list);
std::vector<const Value*> dict_values(const Dict& dict);

struct ProbeMapping {
  std::optional<SourceMapping> mapping;
  std::string error;  // when mapping is empty: the cause map_source gave
};

ProbeMapping try_mapping(const InputData& data, const std::string& origin,
                         const ProbeOptions& options);
// A column an array reader handed over, as one line: "/train: tensor f32 [1000, 128]".
std::string array_text(const InputColumn& column);

}  // namespace gpucache::detail
