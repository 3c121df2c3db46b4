// The one UTF-8 validator (common/utf8.hpp) against the cases Python's strict codec refuses.
#include <doctest/doctest.h>

#include <string>

#include "gpucache/common/utf8.hpp"

using gpucache::detail::first_invalid_utf8;
using gpucache::detail::utf8_sequence_length;
using gpucache::detail::valid_utf8;

TEST_CASE("well-formed UTF-8 of every length is accepted") {
  const std::string text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";  // a é € 😀
  CHECK(valid_utf8(text));
  CHECK(utf8_sequence_length(text, 0) == 1);
  CHECK(utf8_sequence_length(text, 1) == 2);
  CHECK(utf8_sequence_length(text, 3) == 3);
  CHECK(utf8_sequence_length(text, 6) == 4);
  CHECK(valid_utf8(""));
  CHECK(valid_utf8("\xf4\x8f\xbf\xbf"));  // U+10FFFF, the last code point
}

TEST_CASE("what Python's strict codec refuses is refused, at the offending byte") {
  const struct {
    std::string text;
    std::size_t first_bad;
  } cases[] = {
      {"ab\x80", 2},            // a stray continuation byte
      {"\xc0\x80", 0},          // overlong NUL
      {"x\xe0\x80\x80", 1},     // overlong three-byte form
      {"\xed\xa0\x80", 0},      // a surrogate (U+D800)
      {"\xf4\x90\x80\x80", 0},  // beyond U+10FFFF
      {"ok\xe2\x82", 2},        // cut short by the end
      {"\xc3\x28", 0},          // a lead byte without its continuation
      {"\xff", 0},              // never UTF-8
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    CHECK_FALSE(valid_utf8(c.text));
    CHECK(first_invalid_utf8(c.text) == c.first_bad);
  }
}
