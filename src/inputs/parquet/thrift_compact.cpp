// Thrift compact protocol: varints (LEB128), zigzag integers, length-prefixed binaries, list
// headers with the size in the high nibble (15: a varint follows) and struct fields with the id
// as a delta from the last one (0: a zigzag varint follows).
#include "thrift_compact.hpp"

#include "gpucache/error.hpp"

namespace gpucache::detail::parquet {

void ThriftReader::fail(std::string_view cause) const {
  throw Error(origin_, "byte " + std::to_string(base_offset_ + position_),
              "Thrift metadata: " + std::string(cause));
}

void ThriftReader::enter() {
  if (++depth_ > kMaxDepth) fail("nested more than " + std::to_string(kMaxDepth) + " levels deep");
}

std::uint8_t ThriftReader::read_byte(std::string_view what) {
  if (position_ >= bytes_.size()) fail("ends inside " + std::string(what));
  return static_cast<std::uint8_t>(bytes_[position_++]);
}

std::uint64_t ThriftReader::read_varint(std::string_view what) {
  std::uint64_t value = 0;
  for (unsigned shift = 0; shift < 70; shift += 7) {
    const std::uint8_t byte = read_byte(what);
    if (shift == 63 && (byte & 0x7e) != 0) fail(std::string(what) + " overflows 64 bits");
    value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return value;
  }
  fail(std::string(what) + " is a varint longer than 10 bytes");
}

std::int64_t ThriftReader::read_zigzag(std::string_view what) {
  const std::uint64_t raw = read_varint(what);
  return static_cast<std::int64_t>(raw >> 1) ^ -static_cast<std::int64_t>(raw & 1);
}

void ThriftReader::expect(WireType actual, WireType wanted, std::string_view) {
  if (actual != wanted) throw WrongWireType{};
}

std::int64_t ThriftReader::read_integer(WireType type) {
  switch (type) {
    case WireType::i8:
      return static_cast<std::int8_t>(read_byte("a byte"));
    case WireType::i16:
    case WireType::i32:
    case WireType::i64:
      return read_zigzag("an integer");
    default:
      throw WrongWireType{};
  }
}

std::int32_t ThriftReader::read_i32(WireType type) {
  const std::int64_t value = read_integer(type);
  if (value < INT32_MIN || value > INT32_MAX)
    fail("the 32-bit field holds " + std::to_string(value));
  return static_cast<std::int32_t>(value);
}

bool ThriftReader::read_bool(WireType type) {
  if (type == WireType::bool_true) return true;
  if (type == WireType::bool_false) return false;
  throw WrongWireType{};
}

bool ThriftReader::read_list_bool() {
  return read_byte("a boolean") == 1;
}

std::string_view ThriftReader::read_binary(WireType type) {
  expect(type, WireType::binary, "a string field");
  const std::uint64_t length = read_varint("a string's length");
  if (length > bytes_.size() - position_)
    fail("a string of " + std::to_string(length) + " bytes runs past the end");
  const auto* begin = reinterpret_cast<const char*>(bytes_.data() + position_);
  position_ += length;
  return {begin, static_cast<std::size_t>(length)};
}

ThriftReader::ListHeader ThriftReader::read_list_header(WireType type) {
  if (type != WireType::list && type != WireType::set) throw WrongWireType{};
  const std::uint8_t header = read_byte("a list header");
  std::uint64_t size = header >> 4;
  if (size == 15) size = read_varint("a list's size");
  if (size > bytes_.size() - position_)
    fail("a list of " + std::to_string(size) + " elements is longer than the bytes left");
  return {static_cast<WireType>(header & 0x0f), static_cast<std::uint32_t>(size)};
}

// Inside a list or map a boolean is a byte of its own, not a wire type carrying the value.
void ThriftReader::skip_element(WireType type) {
  if (type == WireType::bool_true || type == WireType::bool_false)
    read_list_bool();
  else
    skip(type);
}

void ThriftReader::skip(WireType type) {
  switch (type) {
    case WireType::bool_true:
    case WireType::bool_false:
      return;
    case WireType::i8:
      read_byte("a byte");
      return;
    case WireType::i16:
    case WireType::i32:
    case WireType::i64:
      read_varint("an integer");
      return;
    case WireType::double_:
      for (int i = 0; i < 8; ++i) read_byte("a double");
      return;
    case WireType::binary:
      read_binary(type);
      return;
    case WireType::list:
    case WireType::set: {
      const ListHeader list = read_list_header(type);
      enter();
      for (std::uint32_t i = 0; i < list.size; ++i) skip_element(list.element);
      leave();
      return;
    }
    case WireType::map: {
      const std::uint64_t size = read_varint("a map's size");
      if (size == 0) return;
      if (size > bytes_.size() - position_) fail("a map is longer than the bytes left");
      const std::uint8_t types = read_byte("a map's types");
      enter();
      for (std::uint64_t i = 0; i < size; ++i) {
        skip_element(static_cast<WireType>(types >> 4));
        skip_element(static_cast<WireType>(types & 0x0f));
      }
      leave();
      return;
    }
    case WireType::structure:
      read_struct([](std::int16_t, WireType) { return false; });
      return;
    default:
      fail("unknown wire type " + std::to_string(static_cast<int>(type)));
  }
}

}  // namespace gpucache::detail::parquet
