// The names of the files in a dataset directory (SPEC.md, "File layout" and "Writing protocol"):
// the one place that says what a shard file, the manifest, the pack plan and their temporaries
// are called, for the writer, verify and the runtime reader alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpucache::shard {

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kPackStateName = "pack-state.json";
inline constexpr std::string_view kTemporarySuffix = ".tmp";

// "shard-00042.gcs": five digits at least, more past 99999.
std::string shard_file_name(std::uint32_t index);
// The index a shard file name carries ("shard-<digits>.gcs", at most 10 digits and below 2^32),
// or nothing for any other name.
std::optional<std::uint32_t> shard_file_index(std::string_view name) noexcept;
// NAME.tmp: a file still being written (renamed into place once complete).
bool is_temporary_name(std::string_view name) noexcept;
// The names a pack writes: shard files, the manifest, the pack plan, and their temporaries.
bool is_dataset_file(std::string_view name) noexcept;

}  // namespace gpucache::shard
