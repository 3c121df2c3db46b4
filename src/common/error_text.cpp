#include "gpucache/common/error_text.hpp"

#include <algorithm>
#include <utility>

#include "gpucache/common/utf8.hpp"

namespace gpucache::detail {
namespace {

void append_hex(std::string& out, unsigned char byte) {
  static constexpr char kDigits[] = "0123456789abcdef";
  out += "\\x";
  out += kDigits[byte >> 4];
  out += kDigits[byte & 15];
}

// Appends text[pos]'s character, escaped; returns the bytes it took. Backslashes are escaped in
// names (so that "\\n" in a name and a line break read differently), not in whole messages, whose
// backslashes are the escapes made here.
std::size_t append_escaped(std::string& out, std::string_view text, std::size_t pos, char quote,
                           bool escape_backslash = true) {
  const auto byte = static_cast<unsigned char>(text[pos]);
  if (const std::size_t length = byte < 0x80 ? 0 : utf8_sequence_length(text, pos)) {
    out.append(text.substr(pos, length));
    return length;
  }
  if ((escape_backslash && byte == '\\') ||
      (quote != '\0' && byte == static_cast<unsigned char>(quote))) {
    out += '\\';
    out += static_cast<char>(byte);
  } else if (byte == '\n') {
    out += "\\n";
  } else if (byte == '\t') {
    out += "\\t";
  } else if (byte == '\r') {
    out += "\\r";
  } else if (byte < 0x20 || byte >= 0x7f) {
    append_hex(out, byte);
  } else {
    out += static_cast<char>(byte);
  }
  return 1;
}

// The escaped text, and whether it was cut short.
std::pair<std::string, bool> escape_prefix(std::string_view text, std::size_t max_chars,
                                           char quote) {
  std::string out;
  out.reserve(std::min(text.size(), max_chars) + 2);
  std::size_t pos = 0, chars = 0;
  while (pos < text.size()) {
    if (chars == max_chars) return {std::move(out), true};
    pos += append_escaped(out, text, pos, quote);
    ++chars;
  }
  return {std::move(out), false};
}

std::string length_note(std::size_t bytes) {
  std::string note = " (";  // piecewise: " (" + std::to_string() trips GCC 12's -Wrestrict
  note += std::to_string(bytes);
  note += " bytes)";
  return note;
}

}  // namespace

std::string escaped(std::string_view text, std::size_t max_chars, char quote) {
  auto [out, cut] = escape_prefix(text, max_chars, quote);
  if (cut) {
    out += "...";
    out += length_note(text.size());
  }
  return out;
}

std::string quoted(std::string_view text, std::size_t max_chars, char quote) {
  auto [body, cut] = escape_prefix(text, max_chars, quote);
  std::string out(1, quote);
  out += body;
  if (cut) out += "...";
  out += quote;
  if (cut) out += length_note(text.size());
  return out;
}

std::string one_line(std::string_view message, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(message.size(), max_bytes) + 32);
  std::size_t pos = 0;
  while (pos < message.size()) {
    const char c = message[pos];
    if (c == '\n' || c == '\r') {
      // A line break and the indentation after it separate two parts of one message.
      while (pos < message.size() && (message[pos] == '\n' || message[pos] == '\r' ||
                                      message[pos] == ' ' || message[pos] == '\t'))
        ++pos;
      while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
      if (!out.empty() && pos < message.size()) out += out.back() == ':' ? " " : "; ";
      continue;
    }
    if (c == '\t') {
      out += ' ';
      ++pos;
      continue;
    }
    pos += append_escaped(out, message, pos, '\0', false);
  }
  if (out.size() <= max_bytes) return out;
  // Keep the start (file and place) and the end (often the cause), cut on character boundaries.
  const std::size_t keep = max_bytes / 2;
  std::size_t head = keep, tail = out.size() - keep;
  while (head > 0 && (static_cast<unsigned char>(out[head]) & 0xc0) == 0x80) --head;
  while (tail < out.size() && (static_cast<unsigned char>(out[tail]) & 0xc0) == 0x80) ++tail;
  std::string shortened = out.substr(0, head);
  shortened += " ...";
  shortened += length_note(out.size());
  shortened += " ... ";
  shortened += out.substr(tail);
  return shortened;
}

}  // namespace gpucache::detail
