// Key paths into a Value tree, as written after --field COLUMN= (grammar in schema.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpucache/value.hpp"

namespace gpucache::detail {

struct PathSegment {
  enum class Kind { key, index, wildcard, keys };
  Kind kind = Kind::key;
  std::string key;          // Kind::key
  std::uint64_t index = 0;  // Kind::index
};

using KeyPath = std::vector<PathSegment>;

// Throws UsageError naming the path and the column where it stops making sense.
KeyPath parse_path(std::string_view text);
// The canonical spelling, which parse_path reads back to the same path; "." for the root.
std::string format_path(const KeyPath& path);
KeyPath with_key(KeyPath path, std::string key);
KeyPath with_wildcard(KeyPath path);
KeyPath with_keys(KeyPath path);

// What a path reaches: one node, the nodes a [*] visited (one per row), or a dict's keys.
struct PathTarget {
  enum class Form { node, gathered, keys };
  Form form = Form::node;
  const Value* node = nullptr;
  std::vector<const Value*> gathered;
  std::vector<std::string_view> keys;
};

// Walks root along path. Throws gpucache::Error naming origin, the path, and the first step that
// does not exist (with the keys or length that do). The pointers stay valid while root lives.
PathTarget resolve_path(const Value& root, const KeyPath& path, const std::string& origin);

}  // namespace gpucache::detail
