#include "schema_left_out.hpp"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "gpucache/error.hpp"
#include "schema_columns.hpp"
#include "schema_detect.hpp"
#include "schema_path.hpp"

namespace gpucache::detail {
namespace {

constexpr int kMaxNesting = 8;  // as deep as layout detection looks

// Where a column's path leaves the rows' container: the path up to and including the `[*]`
// whose next step is a key (rows of dicts), or up to its last key (a dict of parallel arrays).
// The key after it is the column's field. Paths of other forms (an LLM cache's @keys, a root
// array) have no sibling fields.
struct RowLevel {
  KeyPath container;
  bool per_row = false;  // the container is a list of dicts, one per row
  std::string key;
};

std::optional<RowLevel> row_level(const std::string& path_text) {
  const KeyPath path = parse_path(path_text);
  for (std::size_t i = 0; i + 1 < path.size(); ++i)
    if (path[i].kind == PathSegment::Kind::wildcard) {
      if (path[i + 1].kind != PathSegment::Kind::key) return std::nullopt;
      return RowLevel{KeyPath(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(i) + 1),
                      true, path[i + 1].key};
    }
  if (path.empty() || path.back().kind != PathSegment::Kind::key) return std::nullopt;
  for (const auto& segment : path)
    if (segment.kind != PathSegment::Kind::key && segment.kind != PathSegment::Kind::index)
      return std::nullopt;
  return RowLevel{KeyPath(path.begin(), path.end() - 1), false, path.back().key};
}

std::string plural_rows(std::uint64_t rows) {
  return std::to_string(rows) + " row" + (rows == 1 ? "" : "s");
}

class Remaining {
 public:
  Remaining(const Value& root, const std::string& origin, bool take_columns, SourceMapping& mapping)
      : root_(root), origin_(origin), take_(take_columns), mapping_(mapping) {
    for (const auto& column : mapping.columns) names_.insert(column.name);
  }

  // `dict`: a representative of the container's dicts (the first row, or the dict itself).
  void fields_of(const Dict& dict, const KeyPath& base, const std::string& name_prefix,
                 const std::unordered_set<std::string>& used, int depth) {
    for (const auto& [key, value] : dict.items) {
      if (used.count(key)) continue;
      const KeyPath path = with_key(base, key);
      const std::string field = format_path(path);
      const std::string part = column_name_from_key(key);
      if (part.empty()) {
        leave_out(field, "its key makes no column name; name it with --field NAME=" + field);
        continue;
      }
      const std::string name = name_prefix.empty() ? part : name_prefix + "." + part;
      if (const Dict* nested = value.as_dict(); nested && depth < kMaxNesting) {
        if (nested->items.empty())
          leave_out(field, "an empty dict");
        else
          fields_of(*nested, path, name, {}, depth + 1);
        continue;
      }
      consider(field, name, value);
    }
  }

 private:
  void leave_out(const std::string& field, std::string reason) {
    mapping_.left_out.push_back({field, std::move(reason)});
  }

  void consider(const std::string& field, const std::string& name, const Value& value) {
    if (names_.count(name)) {
      leave_out(field, "its column name '" + name + "' is taken by another column; name it with " +
                           "--field OTHER_NAME=" + field);
      return;
    }
    InputColumn column;
    try {
      column = build_column(root_, origin_, {name, field, ""}, std::nullopt);
    } catch (const Error& error) {
      leave_out(field, error.cause());
      return;
    }
    if (column.rows != mapping_.rows) {
      const bool single = !value.as_list() && !value.as_tensor();
      leave_out(field, single ? "one value for the whole input, not one per row"
                              : "holds " + plural_rows(column.rows) + ", not the dataset's " +
                                    std::to_string(mapping_.rows));
      return;
    }
    if (!take_) {
      mapping_.not_selected.push_back(field);
      return;
    }
    names_.insert(name);
    mapping_.fields.push_back({column.name, column.path, ""});
    mapping_.columns.push_back(std::move(column));
  }

  const Value& root_;
  const std::string& origin_;
  bool take_;
  SourceMapping& mapping_;
  std::unordered_set<std::string> names_;
};

}  // namespace

void add_remaining_fields(const Value& root, const std::string& origin, bool take_columns,
                          SourceMapping& mapping) {
  // One container per distinct prefix (a dialogue's columns all come from `[*]`).
  std::vector<std::pair<RowLevel, std::unordered_set<std::string>>> levels;
  for (const auto& field : mapping.fields) {
    if (!field.file.empty()) continue;
    const auto level = row_level(field.path);
    if (!level) continue;
    auto found = std::find_if(levels.begin(), levels.end(), [&](const auto& entry) {
      return format_path(entry.first.container) == format_path(level->container) &&
             entry.first.per_row == level->per_row;
    });
    if (found == levels.end()) {
      levels.push_back({*level, {}});
      found = levels.end() - 1;
    }
    found->second.insert(level->key);
  }
  Remaining remaining(root, origin, take_columns, mapping);
  for (const auto& [level, used] : levels) {
    const Dict* dict = nullptr;
    if (level.per_row) {
      const KeyPath list_path(level.container.begin(), level.container.end() - 1);
      const PathTarget target = resolve_path(root, list_path, origin);
      const List* list = target.node ? target.node->as_list() : nullptr;
      if (list && !list->items.empty()) dict = list->items.front().as_dict();
    } else {
      const PathTarget target = resolve_path(root, level.container, origin);
      dict = target.node ? target.node->as_dict() : nullptr;
    }
    if (dict) remaining.fields_of(*dict, level.container, "", used, 0);
  }
}

}  // namespace gpucache::detail
