#include "schema_path.hpp"

#include <algorithm>
#include <charconv>

#include "gpucache/error.hpp"
#include "value_summary.hpp"

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
    syntax_error(text, position,
                 "expected [N], [*] or [\"key\"], found [" + std::string(digits) + "]");
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

// One step from node, or nullptr where it leads nowhere. Runs once per row: no strings here.
const Value* try_step(const Value& node, const PathSegment& segment) {
  if (const Dict* dict = node.as_dict()) {
    if (segment.kind == PathSegment::Kind::key) return dict->find(segment.key);
    if (segment.kind == PathSegment::Kind::index) return dict->find(std::to_string(segment.index));
    return nullptr;
  }
  const List* list = node.as_list();
  if (list && segment.kind == PathSegment::Kind::index && segment.index < list->items.size())
    return &list->items[segment.index];
  return nullptr;
}

// Why try_step failed; `walked` is the path up to node.
[[noreturn]] void step_error(const Value& node, const PathSegment& segment, const KeyPath& walked,
                             const KeyPath& full, const std::string& origin) {
  const std::string where = "path '" + format_path(full) + "'";
  const std::string here = place(walked);
  const std::string key =
      segment.kind == PathSegment::Kind::key ? segment.key : std::to_string(segment.index);
  if (const Dict* dict = node.as_dict())
    throw Error(
        origin, where,
        here + " has no key " + quote_text(key, 60) + " (its keys: " + key_list(*dict) + ")");
  if (const List* list = node.as_list(); list && segment.kind == PathSegment::Kind::index)
    throw Error(
        origin, where,
        here + " has " + std::to_string(list->items.size()) + " elements, no [" + key + "]");
  throw Error(origin, where,
              here + " is " + value_signature(node) + ", which has no key " + quote_text(key, 60));
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
                    place(walked) + " is " + value_signature(*node) + "; @keys needs a dict");
      target.form = PathTarget::Form::keys;
      target.keys.reserve(dict->items.size());
      for (const auto& [key, value] : dict->items) target.keys.push_back(key);
      return target;
    }
    const Value* next = try_step(*node, segment);
    if (!next) step_error(*node, segment, walked, path, origin);
    node = next;
    walked.push_back(segment);
  }
  if (i == path.size()) {
    target.node = node;
    return target;
  }

  // [*]: the rest of the path is applied to every element (or dict value), one row each.
  std::vector<const Value*> elements;
  const List* list = node->as_list();
  const Dict* dict = node->as_dict();
  if (list) {
    elements.reserve(list->items.size());
    for (const auto& item : list->items) elements.push_back(&item);
  } else if (dict) {
    elements.reserve(dict->items.size());
    for (const auto& [key, value] : dict->items) elements.push_back(&value);
  } else {
    throw Error(origin, "path '" + format_path(path) + "'",
                place(walked) + " is " + value_signature(*node) + "; [*] needs a list or a dict");
  }
  // The step naming element `row` in messages: [17] in a list, ["key"] in a dict.
  auto label = [&](std::size_t row) {
    return list ? PathSegment{PathSegment::Kind::index, {}, row}
                : PathSegment{PathSegment::Kind::key, dict->items[row].first, 0};
  };
  target.form = PathTarget::Form::gathered;
  target.gathered.reserve(elements.size());
  const std::size_t rest = i + 1;
  for (std::size_t row = 0; row < elements.size(); ++row) {
    const Value* element = elements[row];
    for (std::size_t j = rest; j < path.size(); ++j) {
      const Value* next = try_step(*element, path[j]);
      if (!next) {
        KeyPath element_path = walked;
        element_path.push_back(label(row));
        element_path.insert(element_path.end(), path.begin() + rest, path.begin() + j);
        step_error(*element, path[j], element_path, path, origin);
      }
      element = next;
    }
    target.gathered.push_back(element);
  }
  return target;
}

}  // namespace gpucache::detail
