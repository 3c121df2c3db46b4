// A bounds-checked cursor over untrusted bytes. Every read checks the remaining length first and
// throws gpucache::Error naming the file, the byte offset and the field being read.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "gpucache/error.hpp"

namespace gpucache::detail {

class ByteReader {
 public:
  ByteReader(std::span<const std::byte> bytes, std::string file, std::uint64_t base_offset = 0)
      : bytes_(bytes), file_(std::move(file)), base_offset_(base_offset) {}

  std::uint64_t position() const noexcept { return position_; }
  // Absolute offset in the file, for error messages.
  std::uint64_t file_offset() const noexcept { return base_offset_ + position_; }
  std::uint64_t remaining() const noexcept { return bytes_.size() - position_; }
  bool at_end() const noexcept { return position_ == bytes_.size(); }
  const std::string& file() const noexcept { return file_; }

  void seek(std::uint64_t position, std::string_view what) {
    if (position > bytes_.size())
      fail(what, "offset " + std::to_string(position) + " is past the end");
    position_ = position;
  }

  std::span<const std::byte> take(std::uint64_t length, std::string_view what) {
    if (length > remaining())
      fail(what, "needs " + std::to_string(length) + " bytes but only " +
                     std::to_string(remaining()) + " remain");
    auto result = bytes_.subspan(position_, length);
    position_ += length;
    return result;
  }

  template <typename T>
  T read_le(std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    std::memcpy(&value, take(sizeof(T), what).data(), sizeof(T));
    if constexpr (std::endian::native == std::endian::big && sizeof(T) > 1) value = byteswap(value);
    return value;
  }

  template <typename T>
  T read_be(std::string_view what) {
    T value = read_le<T>(what);
    if constexpr (sizeof(T) > 1) value = byteswap(value);
    return value;
  }

  std::string_view read_string(std::uint64_t length, std::string_view what) {
    auto span = take(length, what);
    return {reinterpret_cast<const char*>(span.data()), span.size()};
  }

  [[noreturn]] void fail(std::string_view what, std::string_view cause) const {
    throw Error(file_, "byte " + std::to_string(file_offset()),
                std::string(what) + ": " + std::string(cause));
  }

 private:
  template <typename T>
  static T byteswap(T value) {
    unsigned char raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    for (std::size_t i = 0; i < sizeof(T) / 2; ++i) std::swap(raw[i], raw[sizeof(T) - 1 - i]);
    std::memcpy(&value, raw, sizeof(T));
    return value;
  }

  std::span<const std::byte> bytes_;
  std::string file_;
  std::uint64_t base_offset_;
  std::uint64_t position_ = 0;
};

}  // namespace gpucache::detail
