#include "npy/npy_header.hpp"

#include <cctype>
#include <string_view>

#include "gpucache/common/byte_reader.hpp"
#include "gpucache/common/checked_math.hpp"
#include "gpucache/error.hpp"

namespace gpucache::detail {
namespace {

constexpr std::uint64_t kMaxHeaderBytes = 1 << 20;
constexpr std::size_t kMaxRank = 64;  // numpy's own NPY_MAXDIMS

// Reads the one dict literal numpy writes. Only the forms numpy produces are accepted: string
// keys, string values, True/False, and tuples of non-negative integers (an 'L' suffix from
// Python 2 writers is allowed).
class LiteralParser {
 public:
  LiteralParser(std::string_view text, const std::string& file, const std::string& where)
      : text_(text), file_(file), where_(where) {}

  NpyHeader parse() {
    NpyHeader header;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (!consume('}')) {
      const std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        if (peek() == '[')
          fail("structured dtypes (a list of fields in 'descr') are not supported");
        parse_descr(parse_string(), header);
        have_descr = true;
      } else if (key == "fortran_order") {
        header.fortran_order = parse_bool();
        have_order = true;
      } else if (key == "shape") {
        header.shape = parse_shape();
        have_shape = true;
      } else {
        fail("unexpected key '" + key + "'");
      }
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the header dict");
    if (!have_descr || !have_order || !have_shape)
      fail("header dict must have 'descr', 'fortran_order' and 'shape'");
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& cause) const { throw Error(file_, where_, cause); }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t'))
      ++pos_;
  }
  char peek() {
    skip_space();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool consume(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("malformed header dict: expected '") + c + "'");
  }

  std::string parse_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("malformed header dict: expected a string");
    const auto end = text_.find(quote, ++pos_);
    if (end == std::string_view::npos) fail("malformed header dict: unterminated string");
    std::string value(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return value;
  }

  bool parse_bool() {
    skip_space();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::string_view w(word);
      if (text_.substr(pos_, w.size()) == w) {
        pos_ += w.size();
        return value;
      }
    }
    fail("malformed header dict: 'fortran_order' must be True or False");
  }

  std::vector<std::int64_t> parse_shape() {
    std::vector<std::int64_t> shape;
    expect('(');
    while (!consume(')')) {
      skip_space();
      std::uint64_t value = 0;
      const std::size_t start = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        auto next = checked_mul(value, 10);
        next = next ? checked_add(*next, static_cast<std::uint64_t>(text_[pos_] - '0')) : next;
        if (!next || *next > static_cast<std::uint64_t>(INT64_MAX))
          fail("shape dimension too large");
        value = *next;
        ++pos_;
      }
      if (pos_ == start) fail("malformed header dict: shape must be a tuple of integers");
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;
      if (shape.size() == kMaxRank) fail("shape has more than 64 dimensions");
      shape.push_back(static_cast<std::int64_t>(value));
      if (!consume(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }

  void parse_descr(const std::string& descr, NpyHeader& header) {
    std::string_view code(descr);
    char order = '=';
    if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '=')) {
      order = code[0];
      code.remove_prefix(1);
    }
    if (!code.empty() && code[0] == 'O')
      fail("object arrays (dtype '" + descr +
           "') hold pickled Python objects and are not supported");
    std::uint64_t itemsize = 0;
    bool digits = code.size() >= 2;
    for (std::size_t i = 1; digits && i < code.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(code[i])) || itemsize > 1000)
        digits = false;
      else
        itemsize = itemsize * 10 + static_cast<std::uint64_t>(code[i] - '0');
    }
    const auto dtype = digits ? numpy_dtype(code[0], itemsize) : std::nullopt;
    if (!dtype) fail("dtype '" + descr + "' is not supported");
    header.dtype = *dtype;
    // '=' is the writer's native order; every platform numpy writes .npy on today is
    // little-endian, and numpy itself writes '<' or '>' explicitly.
    header.big_endian = order == '>' && itemsize > 1;
  }

  std::string_view text_;
  const std::string& file_;
  const std::string& where_;
  std::size_t pos_ = 0;
};

}  // namespace

std::optional<DType> numpy_dtype(char kind, std::uint64_t itemsize) noexcept {
  switch (kind) {
    case 'f':
      if (itemsize == 2) return DType::f16;
      if (itemsize == 4) return DType::f32;
      if (itemsize == 8) return DType::f64;
      break;
    case 'i':
      if (itemsize == 1) return DType::i8;
      if (itemsize == 2) return DType::i16;
      if (itemsize == 4) return DType::i32;
      if (itemsize == 8) return DType::i64;
      break;
    case 'u':
      if (itemsize == 1) return DType::u8;
      if (itemsize == 2) return DType::u16;
      if (itemsize == 4) return DType::u32;
      if (itemsize == 8) return DType::u64;
      break;
    case 'b':
      if (itemsize == 1) return DType::boolean;
      break;
    default:
      break;
  }
  return std::nullopt;
}

NpyHeader parse_npy_header(std::span<const std::byte> bytes, const std::string& file,
                           const std::string& where) {
  ByteReader reader(bytes, file);
  const auto magic = reader.read_string(6, "npy magic");
  if (magic != "\x93NUMPY") throw Error(file, where, "not a .npy array (bad magic)");
  const auto major = reader.read_le<std::uint8_t>("npy major version");
  reader.read_le<std::uint8_t>("npy minor version");
  std::uint64_t header_length = 0;
  if (major == 1)
    header_length = reader.read_le<std::uint16_t>("npy header length");
  else if (major == 2 || major == 3)
    header_length = reader.read_le<std::uint32_t>("npy header length");
  else
    throw Error(file, where, "unsupported .npy version " + std::to_string(major));
  if (header_length > kMaxHeaderBytes)
    throw Error(file, where, "header of " + std::to_string(header_length) + " bytes exceeds 1 MiB");
  if (header_length > reader.remaining())
    throw Error(file, where,
                "header of " + std::to_string(header_length) + " bytes runs past the end (" +
                    std::to_string(reader.remaining()) + " bytes left)");
  // Version 1 and 2 headers are latin-1, version 3 UTF-8; the accepted grammar is ASCII anyway.
  const auto text = reader.read_string(header_length, "npy header");
  NpyHeader header = LiteralParser(text, file, where).parse();
  header.data_offset = reader.position();
  return header;
}

Tensor npy_tensor(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                  const std::string& file, const std::string& where) {
  NpyHeader header = parse_npy_header(bytes, file, where);
  Tensor tensor;
  tensor.dtype = header.dtype;
  tensor.big_endian = header.big_endian;
  tensor.shape = std::move(header.shape);
  const std::size_t rank = tensor.shape.size();
  tensor.strides.assign(rank, 0);
  std::uint64_t numel = 1;
  for (std::size_t k = 0; k < rank; ++k) {
    // Fortran order walks dimensions first to last; C order last to first.
    const std::size_t i = header.fortran_order ? k : rank - 1 - k;
    tensor.strides[i] = static_cast<std::int64_t>(numel);
    auto next = checked_mul(numel, static_cast<std::uint64_t>(tensor.shape[i]));
    if (!next || *next > static_cast<std::uint64_t>(INT64_MAX))
      throw Error(file, where, "shape has more elements than fit in 64 bits");
    numel = *next;
  }
  const auto nbytes = checked_mul(numel, dtype_size(tensor.dtype));
  const std::uint64_t available = bytes.size() - header.data_offset;
  if (!nbytes || *nbytes != available)
    throw Error(file, where,
                "shape needs " + (nbytes ? std::to_string(*nbytes) : std::string("over 2^64")) +
                    " data bytes but " + std::to_string(available) + " follow the header");
  auto storage = std::make_shared<Storage>();
  storage->bytes = bytes.subspan(header.data_offset);
  storage->owner = std::move(owner);
  tensor.storage = std::move(storage);
  tensor.check_bounds(file);
  return tensor;
}

}  // namespace gpucache::detail
