// Well-formed UTF-8 as Python's strict codec and safetensors' JSON parser define it: no overlong
// forms, no surrogates, nothing above U+10FFFF. One definition for every reader that must refuse
// text that is not UTF-8 (.npy names, zip member names, text columns in memory) and for the
// escaping of error messages. (Pickle's strings are decoded with surrogates allowed, as Python's
// pickle does, in pt/pickle_text.cpp.)
#pragma once

#include <cstddef>
#include <string_view>

namespace gpucache::detail {

// The bytes of the well-formed sequence that starts at text[pos] (1 for ASCII), or 0 when the
// bytes there are not UTF-8 (a stray continuation byte, an overlong form, a surrogate, a code
// point beyond U+10FFFF, or a sequence cut short by the end of text). pos < text.size().
std::size_t utf8_sequence_length(std::string_view text, std::size_t pos) noexcept;

// The offset of the first byte that does not start a well-formed sequence, or text.size().
std::size_t first_invalid_utf8(std::string_view text) noexcept;

inline bool valid_utf8(std::string_view text) noexcept {
  return first_invalid_utf8(text) == text.size();
}

}  // namespace gpucache::detail
