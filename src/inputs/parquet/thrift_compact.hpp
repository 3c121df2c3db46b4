// A reader of Thrift's compact protocol, the encoding of every Parquet footer and page header
// (FORMAT.md beside this file). Only what Parquet's structures use: structs of fields, integers,
// booleans, binaries and lists; anything else is skipped by its wire type. Every read is bounded
// by the bytes given, nesting by kMaxDepth, and a list's length by the bytes left, so a hostile
// footer fails with one Error instead of exhausting the stack or memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace gpucache::detail::parquet {

// The compact protocol's wire types (the low nibble of a field header).
enum class WireType : std::uint8_t {
  stop = 0,
  bool_true = 1,
  bool_false = 2,
  i8 = 3,
  i16 = 4,
  i32 = 5,
  i64 = 6,
  double_ = 7,
  binary = 8,
  list = 9,
  set = 10,
  map = 11,
  structure = 12,
};

class ThriftReader {
 public:
  // `origin` and `base_offset` (where bytes[0] lies in the file) name errors' file and byte.
  ThriftReader(std::span<const std::byte> bytes, const std::string& origin,
               std::uint64_t base_offset) noexcept
      : bytes_(bytes), origin_(origin), base_offset_(base_offset) {}

  // Reads one struct: on_field(id, type) for each field until STOP. on_field reads the value with
  // the functions below and returns true, or returns false to have it skipped.
  template <class OnField>
  void read_struct(OnField&& on_field) {
    enter();
    std::int16_t last_id = 0;
    for (;;) {
      const std::uint8_t header = read_byte("a field header");
      if (header == 0) break;
      const auto type = static_cast<WireType>(header & 0x0f);
      const unsigned delta = header >> 4;
      const std::int16_t id = delta != 0 ? static_cast<std::int16_t>(last_id + delta)
                                         : static_cast<std::int16_t>(read_zigzag("a field id"));
      last_id = id;
      // A field of another wire type than its reader expects is skipped, as Thrift's generated
      // code (and so pyarrow) skips it: fastparquet's has_nulls="infer" writes one such field.
      // The reads throw WrongWireType before they take a byte, so the value is still there.
      bool read = false;
      try {
        read = on_field(id, type);
      } catch (const WrongWireType&) {
        read = false;
      }
      if (!read) skip(type);
    }
    leave();
  }

  // Thrown by the reads below for a field of another wire type, before they read anything;
  // read_struct catches it and skips the field.
  struct WrongWireType {};

  // An integer field of any width (i8, i16, i32 or i64); WrongWireType for another type.
  std::int64_t read_integer(WireType type);
  // read_integer, failing unless the value fits an int32.
  std::int32_t read_i32(WireType type);
  // A boolean field: the value is its type (compact protocol), or a byte inside a list.
  bool read_bool(WireType type);
  std::string_view read_binary(WireType type);

  struct ListHeader {
    WireType element;
    std::uint32_t size;
  };
  // A list or set header; its size is at most the bytes left (every element takes one at least).
  ListHeader read_list_header(WireType type);
  // A list element that is a boolean is one byte (1 true, 2 false, as Thrift writes them).
  bool read_list_bool();

  void skip(WireType type);

  std::uint64_t position() const noexcept { return position_; }
  [[noreturn]] void fail(std::string_view cause) const;

  static constexpr int kMaxDepth = 64;

 private:
  std::uint8_t read_byte(std::string_view what);
  std::uint64_t read_varint(std::string_view what);
  std::int64_t read_zigzag(std::string_view what);
  void skip_element(WireType type);
  void expect(WireType actual, WireType wanted, std::string_view what);
  void enter();
  void leave() noexcept { --depth_; }

  std::span<const std::byte> bytes_;
  const std::string& origin_;
  std::uint64_t base_offset_;
  std::uint64_t position_ = 0;
  int depth_ = 0;
};

}  // namespace gpucache::detail::parquet
