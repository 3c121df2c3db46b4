// The one rule for a legal column name (docs/cli.md "Names are the user's"), beside column.hpp's
// kMaxColumnNameBytes and defined in column.cpp. A header of its own so that the many units that
// only describe columns do not depend on it.
#pragma once

#include <string>
#include <string_view>

#include "gpucache/api.hpp"
#include "gpucache/column.hpp"

namespace gpucache {

// The one rule for a legal column name, which is what a stored dataset needs and nothing more
// (docs/cli.md "Names are the user's"): well-formed UTF-8 of 1 to kMaxColumnNameBytes bytes, no
// control character (below 0x20, 0x7f), no '/' (export writes a file per column), not starting with
// '@' (the packer's provenance columns, shard::kProvenancePrefix) and not "." or "..". Case,
// spaces, dots and non-ASCII letters are the user's and kept.
GPUCACHE_API bool valid_column_name(std::string_view name) noexcept;

// The rule above in words, for messages.
inline constexpr std::string_view kColumnNameRule =
    "1 to 255 bytes of UTF-8 without control characters or '/', not starting with '@', not "
    "'.' or '..'";

// `name` changed as little as makes it legal: each byte that is not UTF-8, each control character
// and each '/' becomes '_'; a leading '@' gets a '_' before it; "." and ".." become "_" and "__";
// a name over kMaxColumnNameBytes is cut at a character boundary. Empty when `name` is empty. A
// legal name comes back unchanged; whoever stores the result under another name reports it.
GPUCACHE_API std::string legal_column_name(std::string_view name);

}  // namespace gpucache
