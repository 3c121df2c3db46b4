#include "npy/npy_header.hpp"

#include <cctype>
#include <cstdio>
#include <string_view>

#include "gpucache/common/byte_reader.hpp"
#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/common/error_text.hpp"
#include "gpucache/common/utf8.hpp"
#include "gpucache/error.hpp"

namespace gpucache::detail {
namespace {

// Reads the one dict literal numpy writes: string keys, string values, True/False, and tuples of
// non-negative decimal integers, with the layout Python's literal_eval (which numpy uses) allows
// around them: whitespace including \r and \f, `#` comments, parentheses around the dict.
// literal_eval reads more spellings still (string escapes, hexadecimal, negative dimensions);
// no writer produces them, and they are refused (src/inputs/npy/FORMAT.md, "Strictness").
// Everything numpy itself refuses is refused too.
class LiteralParser {
 public:
  LiteralParser(std::string_view text, int major, const std::string& file, const std::string& where)
      : text_(text), major_(major), file_(file), where_(where) {}

  NpyHeader parse() {
    NpyHeader header;
    bool have_descr = false, have_order = false, have_shape = false;
    std::size_t parens = 0;  // "({...})" is the same dict to Python
    while (consume('(')) ++parens;
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
        fail("unexpected key " + quoted(key, kShownChars, '\''));
      }
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    for (; parens > 0; --parens) expect(')');
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the header dict");
    if (!have_descr || !have_order || !have_shape)
      fail("header dict must have 'descr', 'fortran_order' and 'shape'");
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& cause) const { throw Error(file_, where_, cause); }

  // Python's whitespace between tokens, and comments, which run to the end of their line.
  void skip_space() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n' && text_[pos_] != '\r') ++pos_;
      } else if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f') {
        ++pos_;
      } else {
        return;
      }
    }
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

  // Quoted with ' or ", without escapes: a backslash would be an escape to Python, which numpy's
  // own strings never hold, so it is refused rather than read differently.
  std::string parse_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("malformed header dict: expected a string");
    const auto end = text_.find(quote, ++pos_);
    if (end == std::string_view::npos) fail("malformed header dict: unterminated string");
    const std::string_view value = text_.substr(pos_, end - pos_);
    if (value.find_first_of("\\\n") != std::string_view::npos)
      fail("malformed header dict: escapes and line breaks in strings are not supported");
    pos_ = end + 1;
    return std::string(value);
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

  // A tuple: "()", "(3,)", "(3, 4)", "(3, 4,)". "(3)" is the number 3 to Python, not a shape.
  std::vector<std::int64_t> parse_shape() {
    std::vector<std::int64_t> shape;
    expect('(');
    bool trailing_comma = false;
    while (!consume(')')) {
      skip_space();
      shape.push_back(parse_dimension());
      if (shape.size() > kNpyMaxRank)
        fail("shape has more than " + std::to_string(kNpyMaxRank) + " dimensions (numpy's limit)");
      trailing_comma = consume(',');
      if (!trailing_comma) {
        expect(')');
        break;
      }
    }
    if (shape.size() == 1 && !trailing_comma)
      fail("malformed header dict: shape (N) is a number, not a tuple; write (N,)");
    return shape;
  }

  std::int64_t parse_dimension() {
    std::uint64_t value = 0;
    const std::size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      auto next = checked_mul(value, 10);
      next = next ? checked_add(*next, static_cast<std::uint64_t>(text_[pos_] - '0')) : next;
      if (!next || *next > static_cast<std::uint64_t>(INT64_MAX)) fail("shape dimension too large");
      value = *next;
      ++pos_;
    }
    if (pos_ == start) fail("malformed header dict: shape must be a tuple of integers");
    // Python 3 refuses leading zeros ("007"); numpy never writes them.
    if (pos_ - start > 1 && text_[start] == '0')
      fail("malformed header dict: shape dimension with a leading zero");
    // Python 2 numpy wrote longs as "12L"; numpy strips the L from version 1 and 2 headers only.
    if (pos_ < text_.size() && text_[pos_] == 'L') {
      if (major_ >= 3) fail("malformed header dict: 'L' suffix in a version 3 header");
      ++pos_;
    }
    return static_cast<std::int64_t>(value);
  }

  void parse_descr(const std::string& descr, NpyHeader& header) {
    std::string_view code(descr);
    char order = '=';
    if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '=')) {
      order = code[0];
      code.remove_prefix(1);
    }
    const std::string shown = quoted(descr, kShownChars, '\'');
    if (!code.empty() && code[0] == 'O')
      fail("object arrays (dtype " + shown + ") hold pickled Python objects and are not supported");
    // Digits after the kind: the item size (numpy reads "f04" as "f4"; a size is required here).
    std::uint64_t size = 0;
    bool digits = code.size() >= 2;
    for (std::size_t i = 1; digits && i < code.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(code[i])) || size > 100'000'000)
        digits = false;
      else
        size = size * 10 + static_cast<std::uint64_t>(code[i] - '0');
    }
    if (digits && (code[0] == 'U' || code[0] == 'S')) {
      if (size == 0) fail("dtype " + shown + " holds strings of no characters: not supported");
      header.kind = code[0] == 'U' ? NpyHeader::Kind::unicode : NpyHeader::Kind::bytes;
      header.itemsize = code[0] == 'U' ? 4 * size : size;
      header.big_endian = code[0] == 'U' && order == '>';
      return;
    }
    if (code.size() >= 2 && (code[0] == 'M' || code[0] == 'm') && code[1] == '8') {
      parse_time_descr(code, shown, header);
      header.big_endian = order == '>';
      return;
    }
    const auto dtype = digits ? numpy_dtype(code[0], size) : std::nullopt;
    if (!dtype) fail("dtype " + shown + " is not supported");
    header.dtype = *dtype;
    header.itemsize = size;
    // '=' is the writer's native order; every platform numpy writes .npy on today is
    // little-endian, and numpy itself writes '<' or '>' explicitly.
    header.big_endian = order == '>' && size > 1;
  }

  // "M8[us]" (datetime64: timestamps, or dates in days) and "m8[ns]" (timedelta64: durations):
  // int64 values whose unit gpucache keeps (FORMAT.md, "Dates and times").
  void parse_time_descr(std::string_view code, const std::string& shown, NpyHeader& header) {
    const bool duration = code[0] == 'm';
    std::string_view unit_text = code.substr(2);
    if (unit_text.size() < 3 || unit_text.front() != '[' || unit_text.back() != ']')
      fail("dtype " + shown + " has no unit; save it with one (e.g. datetime64[ns])");
    unit_text = unit_text.substr(1, unit_text.size() - 2);
    const auto unit = parse_time_unit(unit_text);
    if (!unit || (duration && *unit == TimeUnit::D))
      fail("dtype " + shown + " has a unit gpucache does not store (it keeps s, ms, us, ns" +
           std::string(duration ? "" : " and D") + "); convert it first, e.g. with .astype('" +
           std::string(duration ? "m8" : "M8") + "[ns]')");
    header.kind = NpyHeader::Kind::number;
    header.dtype = DType::i64;
    header.itemsize = 8;
    header.time = ColumnTime{duration               ? TimeKind::duration
                             : *unit == TimeUnit::D ? TimeKind::date
                                                    : TimeKind::timestamp,
                             *unit, ""};
  }

  std::string_view text_;
  int major_;
  const std::string& file_;
  const std::string& where_;
  std::size_t pos_ = 0;
};

// The strides (row-major, or column-major for Fortran order), the element count and the data
// size, checked against 64 bits, and the data length that follows the header. Bytes after the
// data are ignored, as numpy ignores them (np.load reads shape x item size bytes and stops).
void check_data_size(NpyHeader& header, std::uint64_t available, const std::string& file,
                     const std::string& where) {
  const std::size_t rank = header.shape.size();
  header.strides.assign(rank, 0);
  std::uint64_t numel = 1;
  for (std::size_t k = 0; k < rank; ++k) {
    // Fortran order walks dimensions first to last; C order last to first.
    const std::size_t i = header.fortran_order ? k : rank - 1 - k;
    header.strides[i] = static_cast<std::int64_t>(numel);
    auto next = checked_mul(numel, static_cast<std::uint64_t>(header.shape[i]));
    if (!next || *next > static_cast<std::uint64_t>(INT64_MAX))
      throw Error(file, where, "shape has more elements than fit in 64 bits");
    numel = *next;
  }
  const auto nbytes = checked_mul(numel, header.itemsize);
  if (!nbytes || *nbytes > available)
    throw Error(file, where,
                "shape needs " + (nbytes ? std::to_string(*nbytes) : std::string("over 2^64")) +
                    " data bytes but " + std::to_string(available) + " follow the header");
  header.data_bytes = *nbytes;
}

Tensor tensor_of(const NpyHeader& header, std::shared_ptr<const Storage> storage) {
  Tensor tensor;
  tensor.dtype = header.dtype;
  tensor.big_endian = header.big_endian;
  tensor.time = header.time;
  tensor.shape = header.shape;
  tensor.strides = header.strides;
  tensor.storage = std::move(storage);
  return tensor;
}

void append_utf8(std::string& out, char32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xc0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xe0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  }
}

// "[3]" or "[1, 2]": an element's index, for messages.
std::string element_name(const std::vector<std::int64_t>& shape, std::uint64_t flat) {
  std::vector<std::uint64_t> index(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    index[i] = flat % static_cast<std::uint64_t>(shape[i]);
    flat /= static_cast<std::uint64_t>(shape[i]);
  }
  std::string text = "[";
  for (std::size_t i = 0; i < index.size(); ++i) text += (i ? ", " : "") + std::to_string(index[i]);
  return text + "]";
}

// Element `flat` (row-major) of a string array as UTF-8, trailing NULs stripped.
std::string decode_string(const NpyHeader& header, const std::byte* element,
                          const std::string& file, const std::string& where, std::uint64_t flat) {
  std::string text;
  if (header.kind == NpyHeader::Kind::bytes) {
    std::size_t length = header.itemsize;
    while (length > 0 && element[length - 1] == std::byte{0}) --length;
    text.assign(reinterpret_cast<const char*>(element), length);
    if (!valid_utf8(text))
      throw Error(file, where,
                  "element " + element_name(header.shape, flat) + " (" + quoted(text, kShownChars) +
                      ") is not UTF-8 text");
    return text;
  }
  std::size_t count = header.itemsize / 4;
  auto code_at = [&](std::size_t i) {
    char32_t code = 0;
    for (std::size_t b = 0; b < 4; ++b) {
      const std::size_t at = header.big_endian ? b : 3 - b;
      code = (code << 8) | std::to_integer<char32_t>(element[4 * i + at]);
    }
    return code;
  };
  while (count > 0 && code_at(count - 1) == 0) --count;
  text.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const char32_t code = code_at(i);
    if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "U+%04X", static_cast<unsigned>(code));
      throw Error(file, where,
                  "element " + element_name(header.shape, flat) + " holds " + hex +
                      " at character " + std::to_string(i) + ", which is not a Unicode character");
    }
    append_utf8(text, code);
  }
  return text;
}

// Nested lists of the elements in row-major order, for dimensions [dim, rank).
Value string_level(const NpyHeader& header, const std::byte* data, std::size_t dim,
                   std::uint64_t offset, std::uint64_t& flat, const std::string& file,
                   const std::string& where) {
  if (dim == header.shape.size())
    return Value(decode_string(header, data + offset * header.itemsize, file, where, flat++));
  auto list = std::make_shared<List>();
  const auto extent = static_cast<std::uint64_t>(header.shape[dim]);
  list->items.reserve(extent);
  for (std::uint64_t i = 0; i < extent; ++i)
    list->items.push_back(string_level(header, data, dim + 1,
                                       offset + i * static_cast<std::uint64_t>(header.strides[dim]),
                                       flat, file, where));
  return Value(std::move(list));
}

}  // namespace

std::optional<DType> numpy_dtype(char kind, std::uint64_t itemsize) noexcept {
  return dtype_from_numpy(kind, itemsize);
}

std::uint64_t npy_prefix_size(std::span<const std::byte> first_bytes) noexcept {
  if (first_bytes.size() < 10) return 12;
  const auto major = std::to_integer<unsigned>(first_bytes[6]);
  std::uint64_t length = std::to_integer<std::uint64_t>(first_bytes[8]) |
                         std::to_integer<std::uint64_t>(first_bytes[9]) << 8;
  if (major == 1) return 10 + std::min(length, kNpyMaxHeaderBytes + 1);
  if (first_bytes.size() < 12) return 12;
  length |= std::to_integer<std::uint64_t>(first_bytes[10]) << 16 |
            std::to_integer<std::uint64_t>(first_bytes[11]) << 24;
  return 12 + std::min(length, kNpyMaxHeaderBytes + 1);
}

NpyHeader parse_npy_header(std::span<const std::byte> bytes, const std::string& file,
                           const std::string& where) {
  ByteReader reader(bytes, file);
  const auto magic = reader.read_string(6, "npy magic");
  if (magic != "\x93NUMPY") throw Error(file, where, "not a .npy array (bad magic)");
  const auto major = reader.read_le<std::uint8_t>("npy major version");
  const auto minor = reader.read_le<std::uint8_t>("npy minor version");
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    throw Error(file, where,
                "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                    " (numpy reads 1.0, 2.0 and 3.0)");
  const std::uint64_t header_length = major == 1
                                          ? reader.read_le<std::uint16_t>("npy header length")
                                          : reader.read_le<std::uint32_t>("npy header length");
  if (header_length > kNpyMaxHeaderBytes)
    throw Error(file, where,
                "header of " + std::to_string(header_length) + " bytes exceeds numpy's limit of " +
                    std::to_string(kNpyMaxHeaderBytes));
  if (header_length > reader.remaining())
    throw Error(file, where,
                "header of " + std::to_string(header_length) + " bytes runs past the end (" +
                    std::to_string(reader.remaining()) + " bytes left)");
  // Version 1 and 2 headers are latin-1, version 3 UTF-8; the accepted grammar is ASCII, and
  // numpy's limit counts characters, which for ASCII are bytes.
  const auto text = reader.read_string(header_length, "npy header");
  NpyHeader header = LiteralParser(text, major, file, where).parse();
  header.data_offset = reader.position();
  return header;
}

Tensor npy_tensor(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                  const std::string& file, const std::string& where) {
  NpyHeader header = parse_npy_header(bytes, file, where);
  if (header.kind != NpyHeader::Kind::number)
    throw Error(file, where, "holds strings, not numbers");
  check_data_size(header, bytes.size() - header.data_offset, file, where);
  auto storage = std::make_shared<Storage>();
  storage->bytes = bytes.subspan(header.data_offset, header.data_bytes);
  storage->owner = std::move(owner);
  Tensor tensor = tensor_of(header, std::move(storage));
  tensor.check_bounds(file);
  return tensor;
}

Value npy_value(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                const std::string& file, const std::string& where) {
  NpyHeader header = parse_npy_header(bytes, file, where);
  if (header.kind == NpyHeader::Kind::number)
    return Value(std::make_shared<Tensor>(npy_tensor(bytes, std::move(owner), file, where)));
  check_data_size(header, bytes.size() - header.data_offset, file, where);
  const std::uint64_t count = header.data_bytes / header.itemsize;
  if (count > kNpyMaxStrings)
    throw Error(file, where,
                "holds " + std::to_string(count) + " strings; at most " +
                    std::to_string(kNpyMaxStrings) +
                    " are read from one array (each becomes a str in memory)");
  // The nested lists count too. Each level of lists holds at most as many lists as there are
  // strings, unless a dimension is zero: then the levels above it are lists of empty lists that
  // no data pays for ((3, 12, 2372085, 758, 0) would be 6.5e10 of them from a 131-byte file,
  // which numpy never materialises). Such a skeleton is refused beyond 65,536 lists.
  const std::uint64_t allowed_lists = count * header.shape.size() + 65536;
  std::uint64_t lists = 0, level_lists = 1;
  for (std::size_t d = 0; d + 1 < header.shape.size() && level_lists != 0; ++d) {
    const auto extent = static_cast<std::uint64_t>(header.shape[d]);
    level_lists = extent != 0 && level_lists > allowed_lists / extent ? allowed_lists + 1
                                                                      : level_lists * extent;
    lists = std::min(lists + level_lists, allowed_lists + 1);
  }
  if (lists > allowed_lists) {
    std::string shape = "(";
    for (std::size_t d = 0; d < header.shape.size(); ++d)
      shape += (d ? ", " : "") + std::to_string(header.shape[d]);
    throw Error(file, where,
                "a string array of shape " + shape + (header.shape.size() == 1 ? ",)" : ")") +
                    " holds " + std::to_string(count) +
                    " strings in more nested lists than that (a zero dimension under large ones); "
                    "gpucache does not build such a skeleton");
  }
  std::uint64_t flat = 0;
  return string_level(header, bytes.data() + header.data_offset, 0, 0, flat, file, where);
}

Tensor npy_tensor_unread(std::span<const std::byte> prefix, std::uint64_t total_size,
                         const std::string& file, const std::string& where) {
  NpyHeader header = parse_npy_header(prefix, file, where);
  if (header.kind != NpyHeader::Kind::number)
    throw Error(file, where, "holds strings, not numbers");
  check_data_size(header, total_size - header.data_offset, file, where);
  Tensor tensor =
      tensor_of(header, std::make_shared<Storage>(Storage::not_read(header.data_bytes)));
  tensor.check_bounds(file);
  return tensor;
}

}  // namespace gpucache::detail
