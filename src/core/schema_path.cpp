#include "src/core/schema_path.hpp"

#include <algorithm>
#include <charconv>

#include "gpucache/error.hpp"
#include "src/core/value_summary.hpp"

namespace gpucache::detail {
namespace {

[[noreturn]] void syntax_error(std::string_view text, std::size_t column, std::string_view cause) {
  throw UsageError("field path '" + std::string(text) + "', column " + std::to_string(column + 1) +
                   ": " + std::string(cause));
}

bool needs_quotes(std::string_view key) {
  return key.empty() || key.front() == '@' ||
         key.find_first_of(".[]\"\\") != std::string_view::npos;
}

std::string quoted(std::string_view key) {
  std::string text = "[\"";
  for (char c : key) {
    if (c == '"' || c == '\\') text += '\\';
    text += c;
  }
  return text + "\"]";
}

// Parses the bracket at text[position] ('['); returns the position after its ']'.
std::size_t parse_bracket(std::string_view text, std::size_t position, KeyPath& path) {
  const std::size_t start = position++;
  if (position < text.size() && text[position] == '*') {
    if (position + 1 >= text.size() || text[position + 1] != ']')
      syntax_error(text, position, "expected ']' after '[*'");
    path.push_back({PathSegment::Kind::wildcard, {}, 0});
    return position + 2;
  }
  if (position < text.size() && text[position] == '"') {
    std::string key;
    ++position;
    while (true) {
      if (position >= text.size()) syntax_error(text, start, "unterminated quoted key");
      char c = text[position++];
      if (c == '"') break;
      if (c == '\\') {
        if (position >= text.size()) syntax_error(text, position, "unterminated escape");
        c = text[position++];
      }
      key += c;
    }
    if (position >= text.size() || text[position] != ']')
      syntax_error(text, position, "expected ']' after the quoted key");
    path.push_back({PathSegment::Kind::key, std::move(key), 0});
    return position + 1;
  }
  const std::size_t close = text.find(']', position);
  if (close == std::string_view::npos) syntax_error(text, start, "'[' without ']'");
  const std::string_view digits = text.substr(position, close - position);
  std::uint64_t index = 0;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size())
    syntax_error(text, position, "expected [N], [*] or [\"key\"], found [" + std::string(digits) + "]");
  path.push_back({PathSegment::Kind::index, {}, index});
  return close + 1;
}

std::string key_list(const Dict& dict) {
  std::string text;
  std::size_t shown = 0;
  for (const auto& [key, value] : dict.items) {
    if (shown == 8) {
      text += ", ... (" + std::to_string(dict.items.size()) + " keys)";
      break;
    }
    text += (shown++ ? ", " : "") + quote_text(key, 40);
  }
  return text.empty() ? "none" : text;
}

// "the root" or 'a.b[3]', for messages. Built with += because "'" + std::string trips GCC 12's
// -Wrestrict false positive.
std::string place(const KeyPath& walked) {
  if (walked.empty()) return "the root";
  std::string text = "'";
  text += format_path(walked);
  text += '\'';
  return text;
}

// One step from node; `walked` is the path up to node, for the message.
const Value& step(const Value& node, const PathSegment& segment, const KeyPath& walked,
                  const KeyPath& full, const std::string& origin) {
  const std::string where = "path '" + format_path(full) + "'";
  const std::string here = place(walked);
  if (segment.kind == PathSegment::Kind::key || segment.kind == PathSegment::Kind::index) {
    const std::string key =
        segment.kind == PathSegment::Kind::key ? segment.key : std::to_string(segment.index);
    if (const Dict* dict = node.as_dict()) {
      if (const Value* found = dict->find(key)) return *found;
      throw Error(origin, where,
                  here + " has no key " + quote_text(key, 60) + " (its keys: " + key_list(*dict) + ")");
    }
    if (const List* list = node.as_list(); list && segment.kind == PathSegment::Kind::index) {
      if (segment.index < list->items.size()) return list->items[segment.index];
      throw Error(origin, where,
                  here + " has " + std::to_string(list->items.size()) + " elements, no [" + key + "]");
    }
    throw Error(origin, where,
                here + " is " + value_signature(node) + ", which has no key " + quote_text(key, 60));
  }
  throw Error(origin, where, "internal: step() given a wildcard");
}

}  // namespace

KeyPath parse_path(std::string_view text) {
  KeyPath path;
  if (text.empty() || text == ".") return path;
  std::size_t position = 0;
  while (position < text.size()) {
    const char c = text[position];
    if (c == '[') {
      position = parse_bracket(text, position, path);
      continue;
    }
    if (c == '.') {
      if (path.empty() && position != 0) syntax_error(text, position, "unexpected '.'");
      ++position;
      if (position >= text.size() || text[position] == '.' || text[position] == '[')
        syntax_error(text, position, "expected a key after '.'");
    } else if (!path.empty()) {
      syntax_error(text, position, "expected '.' or '[' between steps");
    }
    const std::size_t end = std::min(text.find_first_of(".[", position), text.size());
    const std::string_view key = text.substr(position, end - position);
    if (key.find_first_of("]\"\\") != std::string_view::npos)
      syntax_error(text, position, "keys with ']', '\"' or '\\' must be quoted: [\"...\"]");
    if (key == "@keys") {
      path.push_back({PathSegment::Kind::keys, {}, 0});
    } else {
      if (key.front() == '@')
        syntax_error(text, position, "unknown step '" + std::string(key) + "' (only @keys exists)");
      path.push_back({PathSegment::Kind::key, std::string(key), 0});
    }
    position = end;
  }
  const auto wildcards = std::count_if(path.begin(), path.end(), [](const auto& segment) {
    return segment.kind == PathSegment::Kind::wildcard;
  });
  if (wildcards > 1) syntax_error(text, 0, "at most one [*] is allowed");
  for (std::size_t i = 0; i + 1 < path.size(); ++i) {
    if (path[i].kind == PathSegment::Kind::keys)
      syntax_error(text, 0, "@keys must be the last step");
  }
  if (wildcards > 0 && path.back().kind == PathSegment::Kind::keys)
    syntax_error(text, 0, "@keys cannot follow [*]");
  return path;
}

std::string format_path(const KeyPath& path) {
  if (path.empty()) return ".";
  std::string text;
  for (const auto& segment : path) {
    switch (segment.kind) {
      case PathSegment::Kind::key:
        if (needs_quotes(segment.key)) {
          text += quoted(segment.key);
        } else {
          if (!text.empty()) text += '.';
          text += segment.key;
        }
        break;
      case PathSegment::Kind::index:
        text += '[';  // piecewise: "[" + std::to_string() trips GCC 12's -Wrestrict
        text += std::to_string(segment.index);
        text += ']';
        break;
      case PathSegment::Kind::wildcard:
        text += "[*]";
        break;
      case PathSegment::Kind::keys:
        if (!text.empty()) text += '.';
        text += "@keys";
        break;
    }
  }
  return text;
}

KeyPath with_key(KeyPath path, std::string key) {
  path.push_back({PathSegment::Kind::key, std::move(key), 0});
  return path;
}
KeyPath with_wildcard(KeyPath path) {
  path.push_back({PathSegment::Kind::wildcard, {}, 0});
  return path;
}
KeyPath with_keys(KeyPath path) {
  path.push_back({PathSegment::Kind::keys, {}, 0});
  return path;
}

PathTarget resolve_path(const Value& root, const KeyPath& path, const std::string& origin) {
  PathTarget target;
  const Value* node = &root;
  KeyPath walked;
  std::size_t i = 0;
  for (; i < path.size(); ++i) {
    const auto& segment = path[i];
    if (segment.kind == PathSegment::Kind::wildcard) break;
    if (segment.kind == PathSegment::Kind::keys) {
      const Dict* dict = node->as_dict();
      if (!dict)
        throw Error(origin, "path '" + format_path(path) + "'",
                    place(walked) +
                        " is " + value_signature(*node) + "; @keys needs a dict");
      target.form = PathTarget::Form::keys;
      target.keys.reserve(dict->items.size());
      for (const auto& [key, value] : dict->items) target.keys.push_back(key);
      return target;
    }
    node = &step(*node, segment, walked, path, origin);
    walked.push_back(segment);
  }
  if (i == path.size()) {
    target.node = node;
    return target;
  }

  // [*]: the rest of the path is applied to every element (or dict value), one row each.
  // Each element with the step that names it in messages: [17] in a list, ["key"] in a dict.
  std::vector<std::pair<const Value*, PathSegment>> elements;
  if (const List* list = node->as_list()) {
    elements.reserve(list->items.size());
    for (std::size_t row = 0; row < list->items.size(); ++row)
      elements.push_back({&list->items[row], {PathSegment::Kind::index, {}, row}});
  } else if (const Dict* dict = node->as_dict()) {
    elements.reserve(dict->items.size());
    for (const auto& [key, value] : dict->items)
      elements.push_back({&value, {PathSegment::Kind::key, key, 0}});
  } else {
    throw Error(origin, "path '" + format_path(path) + "'",
                place(walked) +
                    " is " + value_signature(*node) + "; [*] needs a list or a dict");
  }
  target.form = PathTarget::Form::gathered;
  target.gathered.reserve(elements.size());
  const std::size_t rest = i + 1;
  for (const auto& [first, label] : elements) {
    const Value* element = first;
    if (rest == path.size()) {
      target.gathered.push_back(element);
      continue;
    }
    KeyPath element_path = walked;
    element_path.push_back(label);
    for (std::size_t j = rest; j < path.size(); ++j) {
      element = &step(*element, path[j], element_path, path, origin);
      element_path.push_back(path[j]);
    }
    target.gathered.push_back(element);
  }
  return target;
}

}  // namespace gpucache::detail
