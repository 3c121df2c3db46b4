#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>

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

std::uint64_t load_u64_le(std::string_view bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 8; i-- > 0;) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

std::uint16_t load_u16_le(std::string_view bytes) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(bytes[0]) |
                                    (static_cast<unsigned char>(bytes[1]) << 8));
}

}  // namespace

std::string_view input_format_name(InputFormat format) noexcept {
  switch (format) {
    case InputFormat::pt:
      return "pt";
    case InputFormat::safetensors:
      return "safetensors";
    case InputFormat::npy:
      return "npy";
    case InputFormat::npz:
      return "npz";
    case InputFormat::jsonl:
      return "jsonl";
  }
  return "unknown";
}

std::optional<InputFormat> format_from_extension(std::string_view path) noexcept {
  const std::string extension = lower_extension(path);
  if (extension == "pt" || extension == "pth" || extension == "bin") return InputFormat::pt;
  if (extension == "safetensors") return InputFormat::safetensors;
  if (extension == "npy") return InputFormat::npy;
  if (extension == "npz") return InputFormat::npz;
  if (extension == "jsonl" || extension == "ndjson" || extension == "json")
    return InputFormat::jsonl;
  return std::nullopt;
}

std::optional<InputFormat> format_from_magic(std::string_view head,
                                             std::uint64_t file_size) noexcept {
  if (head.substr(0, 6) == "\x93NUMPY") return InputFormat::npy;
  if (head.size() >= 30 && head.substr(0, 4) == std::string_view("PK\x03\x04", 4)) {
    // Local file header: the name length is at byte 26, the name at byte 30.
    const std::uint16_t name_length = load_u16_le(head.substr(26, 2));
    const std::string_view name = head.substr(30, name_length);
    const bool npy_entry = name.size() >= 4 && name.substr(name.size() - 4) == ".npy";
    return npy_entry ? InputFormat::npz : InputFormat::pt;
  }
  if (!head.empty() && static_cast<unsigned char>(head[0]) == 0x80) return InputFormat::pt;
  if (head.size() >= 9 && file_size >= 8 && head[8] == '{') {
    const std::uint64_t header_length = load_u64_le(head);
    if (header_length <= file_size - 8) return InputFormat::safetensors;
  }
  const auto first = head.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && head[first] == '{') return InputFormat::jsonl;
  return std::nullopt;
}

InputFormat detect_input_format(const std::string& path) {
  if (auto format = format_from_extension(path)) return *format;
  auto file = detail::MappedFile::open(path);
  const std::string_view head(reinterpret_cast<const char*>(file->data()),
                              std::min<std::size_t>(file->size(), 4096));
  if (auto format = format_from_magic(head, file->size())) return *format;
  throw Error(
      path, "",
      "cannot tell its format from the extension or the first bytes; supported: .pt/.pth/.bin "
      "(torch.save), .safetensors, .npy, .npz, .jsonl/.json (JSON lines)");
}

}  // namespace gpucache
