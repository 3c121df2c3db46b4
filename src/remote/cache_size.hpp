// The size limit of a remote cache as people write it: "20G", "512M", "1.5T", "100000" (bytes).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpucache::remote::detail {

// Bytes for a size with an optional K/M/G/T suffix (powers of 1024, an optional trailing "B" or
// "iB"); std::nullopt for anything else, zero, or a size that overflows.
std::optional<std::uint64_t> parse_cache_size(std::string_view text) noexcept;

}  // namespace gpucache::remote::detail
