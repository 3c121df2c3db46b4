// The registry of input formats, and opening any input through it: by extension first, by magic
// bytes when the extension is unknown or missing. One table (input_registry.cpp) says, per format,
// its name, a title for help text, its extensions, how to recognise its first bytes, its reader,
// and whether it was built in; detection, read_input, the CLI's format lists and the "cannot tell
// its format" error all come from it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gpucache/readers.hpp"
#include "gpucache/value.hpp"

namespace gpucache {

// True when `head` (the first bytes of the file, up to 4 KiB) and the file size look like the
// format. Must not read past head.
using SniffFn = bool (*)(std::string_view head, std::uint64_t file_size) noexcept;

struct InputFormat {
  // What callers, messages and help call it: "pt".
  std::string_view name;
  // A short description for help text: "torch.save files, zip and legacy layouts".
  std::string_view title;
  // Lower case, without the dot, separated by spaces: "pt pth bin". Matched case-insensitively.
  std::string_view extensions;
  // Magic bytes; nullptr when only the extension tells. Tried in table order, so a narrower test
  // (npz: a zip whose first member is a .npy) comes before a broader one (pt: any zip).
  SniffFn sniff = nullptr;
  // The reader; nullptr when the format was left out of this build.
  ReadFn read = nullptr;
  // For a format left out of the build: how to build it in ("-DGPUCACHE_HDF5=ON and libhdf5-dev").
  std::string_view build_hint = {};

  constexpr bool built() const noexcept { return read != nullptr; }
};

// Every format this gpucache knows, built in or not, in the order magic bytes are tried.
std::span<const InputFormat> input_formats() noexcept;
// The format called `name`, or nullptr.
const InputFormat* find_input_format(std::string_view name) noexcept;

// The functions below take the table to use; callers pass nothing and get input_formats(). Tests
// pass tables of their own (a format that is not built, a reader that records its call).

// The format whose extensions include path's (case-insensitive), or nullptr.
const InputFormat* format_from_extension(
    std::string_view path, std::span<const InputFormat> formats = input_formats()) noexcept;
// The first format whose sniff accepts the first bytes, or nullptr.
const InputFormat* format_from_magic(
    std::string_view head, std::uint64_t file_size,
    std::span<const InputFormat> formats = input_formats()) noexcept;
// Extension first, then magic bytes. Throws gpucache::Error naming the file, with the list of
// built formats, when neither tells. A format that is not built is still recognised.
const InputFormat& detect_input_format(const std::string& path,
                                       std::span<const InputFormat> formats = input_formats());

// Reads path with the reader of the format detect_input_format picks. A format left out of this
// build is one error line: "FILE: hdf5 input was not built into this gpucache (configure with
// -DGPUCACHE_HDF5=ON and libhdf5-dev)".
InputData read_input(const std::string& path, const ReadOptions& options = {},
                     std::span<const InputFormat> formats = input_formats());

// "npy (.npy), npz (.npz), pt (.pt/.pth/.bin), ...": the built formats, for one-line messages.
std::string supported_input_formats(std::span<const InputFormat> formats = input_formats());
// A table for --help: one line per format with its name, extensions and title; formats that are
// not built say so and how to build them.
std::string input_formats_help(std::span<const InputFormat> formats = input_formats());

}  // namespace gpucache
