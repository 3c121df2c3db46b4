// Opens any supported input by picking its reader: by extension first, by magic bytes when the
// extension is unknown or missing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gpucache/readers.hpp"
#include "gpucache/value.hpp"

namespace gpucache {

enum class InputFormat { pt, safetensors, npy, npz, jsonl };

// "pt", "safetensors", "npy", "npz", "jsonl".
std::string_view input_format_name(InputFormat format) noexcept;

// .pt .pth .bin -> pt, .safetensors, .npy, .npz, .jsonl .ndjson .json -> jsonl (case-insensitive).
std::optional<InputFormat> format_from_extension(std::string_view path) noexcept;
// From the first bytes: NumPy magic, zip (npz when its first entry is a .npy, else a torch zip),
// a pickle (legacy torch.save), a safetensors header length followed by '{', or a '{' line.
std::optional<InputFormat> format_from_magic(std::string_view head,
                                             std::uint64_t file_size) noexcept;
// Extension first, then magic bytes. Throws gpucache::Error naming the file when neither tells.
InputFormat detect_input_format(const std::string& path);

// Reads path with the reader detect_input_format picks (readers.hpp).
Value read_input(const std::string& path);
Value read_input(const std::string& path, const ReadOptions& options);

}  // namespace gpucache
