// XXH3-64, the one hash of gpucache (chunks, headers, manifests, inputs), and the 16-digit hex
// spelling manifests and messages use for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace gpucache::detail {

// XXH3_64bits with seed 0: the value `xxhsum -H3` prints.
std::uint64_t xxh3_64(std::span<const std::byte> bytes) noexcept;
// 16 lowercase hex digits.
std::string hex64(std::uint64_t value);
// The inverse of hex64: exactly 16 lowercase hex digits, else nothing.
std::optional<std::uint64_t> parse_hex64(std::string_view text) noexcept;

}  // namespace gpucache::detail
