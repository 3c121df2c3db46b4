#include "gpucache/npy.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <optional>

#include "gpucache/detail/atomic_file.hpp"
#include "gpucache/detail/byte_reader.hpp"
#include "gpucache/detail/checked_math.hpp"
#include "gpucache/detail/mapped_file.hpp"
#include "gpucache/error.hpp"

namespace gpucache {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::uint64_t kMaxHeaderBytes = 1 << 20;
constexpr std::size_t kMaxRank = 32;

struct DescrEntry {
  std::string_view code;  // without byte-order character
  DType dtype;
};
constexpr DescrEntry kDescrs[] = {
    {"f4", DType::f32},     {"f2", DType::f16}, {"f8", DType::f64}, {"i8", DType::i64},
    {"i4", DType::i32},     {"i2", DType::i16}, {"i1", DType::i8},  {"u1", DType::u8},
    {"b1", DType::boolean}, {"u2", DType::u16}, {"u4", DType::u32}, {"u8", DType::u64},
};

// A tiny reader for the Python dict literal numpy writes as the header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& origin) : text_(text), origin_(origin) {}

  void parse(std::string& descr, bool& fortran, std::vector<std::int64_t>& shape) {
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = parse_quoted();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"')
          fail("descr is not a plain type string (structured dtypes are not supported)");
        descr = parse_quoted();
        seen_descr = true;
      } else if (key == "fortran_order") {
        fortran = parse_bool();
        seen_fortran = true;
      } else if (key == "shape") {
        shape = parse_shape();
        seen_shape = true;
      } else {
        fail("unexpected header key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') ++position_;
    }
    if (!seen_descr || !seen_fortran || !seen_shape)
      fail("header lacks descr, fortran_order or shape");
  }

 private:
  char peek() const { return position_ < text_.size() ? text_[position_] : '\0'; }
  void skip_space() {
    while (position_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[position_])))
      ++position_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++position_;
  }
  std::string parse_quoted() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const auto end = text_.find(quote, position_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string result(text_.substr(position_ + 1, end - position_ - 1));
    position_ = end + 1;
    return result;
  }
  bool parse_bool() {
    if (text_.substr(position_, 4) == "True") return position_ += 4, true;
    if (text_.substr(position_, 5) == "False") return position_ += 5, false;
    fail("fortran_order is not True or False");
  }
  std::vector<std::int64_t> parse_shape() {
    expect('(');
    std::vector<std::int64_t> shape;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      std::int64_t extent = 0;
      const auto* begin = text_.data() + position_;
      const auto [end, error] = std::from_chars(begin, text_.data() + text_.size(), extent);
      if (error != std::errc() || extent < 0) fail("shape holds something other than a size");
      position_ += static_cast<std::size_t>(end - begin);
      shape.push_back(extent);
      if (shape.size() > kMaxRank) fail("more than 32 dimensions");
      skip_space();
      if (peek() == 'L') ++position_;  // Python 2 longs
      if (peek() == ',') ++position_;
    }
    ++position_;
    return shape;
  }
  [[noreturn]] void fail(const std::string& cause) const {
    throw Error(origin_, "npy header", cause);
  }

  std::string_view text_;
  const std::string& origin_;
  std::size_t position_ = 0;
};

}  // namespace

Tensor parse_npy(std::span<const std::byte> file, std::shared_ptr<const void> owner,
                 const std::string& origin) {
  detail::ByteReader reader(file, origin);
  if (reader.read_string(6, "npy magic") != std::string_view(kMagic, 6))
    throw Error(origin, "byte 0", "not a .npy file (bad magic)");
  const auto major = reader.read_le<std::uint8_t>("npy version");
  reader.read_le<std::uint8_t>("npy minor version");
  std::uint64_t header_length = 0;
  if (major == 1)
    header_length = reader.read_le<std::uint16_t>("npy header length");
  else if (major == 2 || major == 3)
    header_length = reader.read_le<std::uint32_t>("npy header length");
  else
    throw Error(origin, "byte 6", "unsupported .npy version " + std::to_string(major));
  if (header_length > kMaxHeaderBytes)
    throw Error(origin, "byte 8",
                "header of " + std::to_string(header_length) + " bytes is too large");
  const auto header_text = reader.read_string(header_length, "npy header");

  std::string descr;
  bool fortran = false;
  Tensor tensor;
  HeaderParser(header_text, origin).parse(descr, fortran, tensor.shape);
  if (descr.size() < 2) throw Error(origin, "npy header", "descr '" + descr + "' is not a dtype");
  if (descr.find('O') != std::string::npos)
    throw Error(origin, "npy header",
                "object arrays (dtype 'O') are not supported: they hold Python "
                "objects, not numbers; save a numeric array instead");
  const char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=')
    throw Error(origin, "npy header", "descr '" + descr + "' has no byte order");
  const auto* entry = std::find_if(std::begin(kDescrs), std::end(kDescrs),
                                   [&](const DescrEntry& e) { return e.code == descr.substr(1); });
  if (entry == std::end(kDescrs))
    throw Error(origin, "npy header", "dtype '" + descr + "' is not supported");
  tensor.dtype = entry->dtype;
  tensor.big_endian = order == '>';

  // Fortran order is column-major: express it with strides instead of copying.
  const std::size_t rank = tensor.shape.size();
  tensor.strides.assign(rank, 1);
  std::int64_t stride = 1;
  for (std::size_t k = 0; k < rank; ++k) {
    const std::size_t i = fortran ? k : rank - 1 - k;
    tensor.strides[i] = stride;
    stride *= std::max<std::int64_t>(tensor.shape[i], 1);
  }
  const auto nbytes = detail::checked_mul(tensor.numel(), dtype_size(tensor.dtype));
  if (!nbytes) throw Error(origin, "npy header", "array size overflows");
  if (*nbytes > reader.remaining())
    throw Error(origin, "byte " + std::to_string(reader.file_offset()),
                "array needs " + std::to_string(*nbytes) + " bytes but the file has " +
                    std::to_string(reader.remaining()) + " (truncated?)");
  auto storage = std::make_shared<Storage>();
  storage->bytes = reader.take(*nbytes, "npy data");
  storage->owner = std::move(owner);
  tensor.storage = std::move(storage);
  tensor.check_bounds(origin);
  return tensor;
}

Value read_npy(const std::string& path) {
  auto file = detail::MappedFile::open(path);
  return Value(std::make_shared<Tensor>(parse_npy(file->bytes(), file, path)));
}

std::string npy_descr(DType dtype) {
  for (const auto& entry : kDescrs)
    if (entry.dtype == dtype) return (dtype_size(dtype) == 1 ? "|" : "<") + std::string(entry.code);
  throw Error("", "", std::string("numpy has no dtype for ") + std::string(dtype_name(dtype)));
}

void write_npy(
    const std::string& path, DType dtype, const std::vector<std::uint64_t>& shape,
    const std::function<void(std::span<std::byte>, std::uint64_t, std::uint64_t)>& fill) {
  std::string header = "{'descr': '" + npy_descr(dtype) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i)
    header += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) header += ",";  // a 1-tuple is "(3,)" in Python
  header += "), }";
  // Pad so the data starts on a 64-byte boundary, as numpy does.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';

  detail::AtomicFile file(path);
  std::string prefix("\x93NUMPY\x01\x00", 8);
  prefix += static_cast<char>(header.size() & 0xff);
  prefix += static_cast<char>(header.size() >> 8);
  file.write(std::as_bytes(std::span(prefix.data(), prefix.size())));
  file.write(std::as_bytes(std::span(header.data(), header.size())));

  const std::uint64_t rows = shape.empty() ? 1 : shape[0];
  std::uint64_t row_bytes = dtype_size(dtype);
  for (std::size_t i = 1; i < shape.size(); ++i) row_bytes *= shape[i];
  const std::uint64_t block_rows =
      std::max<std::uint64_t>(1, (8ull << 20) / std::max<std::uint64_t>(row_bytes, 1));
  std::vector<std::byte> block;
  for (std::uint64_t first = 0; first < rows; first += block_rows) {
    const std::uint64_t count = std::min(block_rows, rows - first);
    block.resize(count * row_bytes);
    fill(block, first, count);
    file.write(block);
  }
  file.commit();
}

}  // namespace gpucache
