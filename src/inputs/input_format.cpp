// Everything that follows from the registry's table: detection, dispatch, and the format lists of
// messages and help. Nothing here names a format; the table is in input_registry.cpp.
#include <algorithm>
#include <cctype>

#include "gpucache/common/mapped_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/input.hpp"

namespace gpucache {
namespace {

std::string lower_extension(std::string_view path) {
  const auto slash = path.find_last_of('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const auto dot = name.find_last_of('.');
  if (dot == std::string_view::npos || dot == 0) return {};
  std::string extension(name.substr(dot + 1));
  for (auto& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return extension;
}

// Calls fn(extension) for each of a format's space-separated extensions.
template <class Fn>
void for_each_extension(const InputFormat& format, Fn&& fn) {
  std::string_view rest = format.extensions;
  while (!rest.empty()) {
    const auto space = rest.find(' ');
    const std::string_view extension = rest.substr(0, space);
    if (!extension.empty()) fn(extension);
    rest.remove_prefix(space == std::string_view::npos ? rest.size() : space + 1);
  }
}

// ".pt/.pth/.bin"
std::string dotted_extensions(const InputFormat& format) {
  std::string text;
  for_each_extension(format, [&](std::string_view extension) {
    text += text.empty() ? "." : "/.";
    text += extension;
  });
  return text;
}

// "hdf5 input was not built into this gpucache (configure with -DGPUCACHE_HDF5=ON and ...)"
std::string not_built_message(const InputFormat& format) {
  std::string text = std::string(format.name) + " input was not built into this gpucache";
  if (!format.build_hint.empty())
    text += " (configure with " + std::string(format.build_hint) + ")";
  return text;
}

}  // namespace

const InputFormat* find_input_format(std::string_view name) noexcept {
  for (const auto& format : input_formats())
    if (format.name == name) return &format;
  return nullptr;
}

const InputFormat* format_from_extension(std::string_view path,
                                         std::span<const InputFormat> formats) noexcept {
  const std::string extension = lower_extension(path);
  if (extension.empty()) return nullptr;
  for (const auto& format : formats) {
    bool match = false;
    for_each_extension(format,
                       [&](std::string_view candidate) { match |= candidate == extension; });
    if (match) return &format;
  }
  return nullptr;
}

const InputFormat* format_from_magic(std::string_view head, std::uint64_t file_size,
                                     std::span<const InputFormat> formats) noexcept {
  for (const auto& format : formats)
    if (format.sniff && format.sniff(head, file_size)) return &format;
  return nullptr;
}

const InputFormat& detect_input_format(const std::string& path,
                                       std::span<const InputFormat> formats) {
  if (const auto* format = format_from_extension(path, formats)) return *format;
  auto file = detail::MappedFile::open(path);
  const std::string_view head(reinterpret_cast<const char*>(file->data()),
                              std::min<std::size_t>(file->size(), 4096));
  if (const auto* format = format_from_magic(head, file->size(), formats)) return *format;
  throw Error(path, "",
              "cannot tell its format from the extension or the first bytes; supported: " +
                  supported_input_formats(formats));
}

// The one place a reader is called.
InputData read_input(const std::string& path, const ReadOptions& options,
                     std::span<const InputFormat> formats) {
  const InputFormat& format = detect_input_format(path, formats);
  if (!format.built()) throw Error(path, "", not_built_message(format));
  return format.read(path, options);
}

std::string supported_input_formats(std::span<const InputFormat> formats) {
  std::string text;
  for (const auto& format : formats) {
    if (!format.built()) continue;
    if (!text.empty()) text += ", ";
    text += std::string(format.name) + " (" + dotted_extensions(format) + ")";
  }
  return text;
}

std::string input_formats_help(std::span<const InputFormat> formats) {
  std::size_t name_width = 0, extensions_width = 0;
  for (const auto& format : formats) {
    name_width = std::max(name_width, format.name.size());
    extensions_width = std::max(extensions_width, dotted_extensions(format).size());
  }
  std::string text = "Input formats (by extension, else by the first bytes):";
  for (const auto& format : formats) {
    std::string name(format.name), extensions = dotted_extensions(format);
    name.resize(name_width, ' ');
    extensions.resize(extensions_width, ' ');
    text += "\n  " + name + "  " + extensions + "  " + std::string(format.title);
    if (!format.built()) {
      text += " (not built";
      if (!format.build_hint.empty()) text += "; configure with " + std::string(format.build_hint);
      text += ")";
    }
  }
  return text;
}

}  // namespace gpucache
