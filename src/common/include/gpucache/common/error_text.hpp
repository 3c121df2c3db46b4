// Text from untrusted inputs (tensor names, dict keys, member names, JSON snippets) and from
// users (paths), made fit for gpucache's error messages: one line, short, printable. Every message
// that embeds such text builds it with these functions, and the CLI passes every error through
// one_line() before printing it, so no file can make an error span two lines or megabytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpucache::detail {

// How many characters of a name or key a message shows by default.
inline constexpr std::size_t kShownChars = 64;

// `text` with backslashes, `quote` (when not '\0'), control characters and bytes that are not
// UTF-8 escaped (\n, \t, \r, \\, \', \", \xNN), keeping valid UTF-8 as it is. Beyond
// `max_chars` characters it is cut and ends in "..." followed by " (N bytes)", N being the whole
// text's length, so a reader can tell a long name from a short one.
std::string escaped(std::string_view text, std::size_t max_chars = kShownChars, char quote = '\0');

// `text` escaped and between `quote`s: "name", or 'name' with quote '\''. A cut text reads
// "abc..." (10240 bytes): the length follows the closing quote.
std::string quoted(std::string_view text, std::size_t max_chars = kShownChars, char quote = '"');

// A whole message as one line: each line break, with the indentation after it, becomes "; ",
// other control characters are escaped, and a message longer than `max_bytes` keeps its start
// and its end around "... (N bytes) ...". What the CLI prints for any error.
std::string one_line(std::string_view message, std::size_t max_bytes = 4096);

}  // namespace gpucache::detail
