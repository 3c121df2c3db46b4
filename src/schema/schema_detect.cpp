// Layout detection. Every rule looks only at types, shapes and key names, never at tensor data.
// Rules are tried at the shallowest level first; a level where two candidates fit is an error
// (with flags to pick one), not a guess.
#include "schema_detect.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <functional>
#include <optional>
#include <unordered_set>

#include "gpucache/column_name.hpp"
#include "gpucache/common/error_text.hpp"
#include "gpucache/common/float_convert.hpp"
#include "gpucache/error.hpp"
#include "schema_path.hpp"
#include "value_summary.hpp"

namespace gpucache::detail {
namespace {

constexpr int kMaxDepth = 8;  // deeper trees are not datasets; also bounds cyclic pickles

// The standard columns and the key names each is recognised under (compared lower-cased).
enum Slot { question, answer, question_embedding, answer_embedding, text, embedding, slot_count };

struct SlotInfo {
  std::string_view column;
  bool is_vector;
  std::vector<std::string_view> aliases;
};

const std::array<SlotInfo, slot_count>& slot_table() {
  static const std::array<SlotInfo, slot_count> table{{
      {"question",
       false,
       {"question", "questions", "q", "query", "queries", "prompt", "prompts", "instruction",
        "instructions"}},
      {"answer",
       false,
       {"answer", "answers", "a", "response", "responses", "completion", "completions"}},
      {"question_embedding",
       true,
       {"question_embedding", "question_embeddings", "question_emb", "question_embs",
        "question_vector", "question_vectors", "q_embedding", "q_embeddings", "q_emb", "q_embs",
        "query_embedding", "query_embeddings", "prompt_embedding", "prompt_embeddings"}},
      {"answer_embedding",
       true,
       {"answer_embedding", "answer_embeddings", "answer_emb", "answer_embs", "answer_vector",
        "answer_vectors", "a_embedding", "a_embeddings", "a_emb", "a_embs", "response_embedding",
        "response_embeddings", "completion_embedding", "completion_embeddings"}},
      {"text",
       false,
       {"text", "texts", "sentence", "sentences", "document", "documents", "doc", "docs", "passage",
        "passages", "string", "strings", "content", "contents", "key", "keys"}},
      {"embedding",
       true,
       {"embedding", "embeddings", "emb", "embs", "vector", "vectors", "vecs", "data"}},
  }};
  return table;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool float_tensor(const Tensor* tensor) {
  return tensor && widens_to_f32(tensor->dtype);
}

// [N, D], or [N, 1, ..., D]: one vector per row.
bool matrix_like(const Value& value) {
  const Tensor* tensor = value.as_tensor();
  if (!float_tensor(tensor) || tensor->shape.size() < 2) return false;
  for (std::size_t i = 1; i + 1 < tensor->shape.size(); ++i)
    if (tensor->shape[i] != 1) return false;
  return true;
}

// One row's vector: [D] or [1, D] float tensor, or a list of numbers.
bool vector_value(const Value& value) {
  if (const Tensor* tensor = value.as_tensor()) {
    if (!float_tensor(tensor) || tensor->shape.empty()) return false;
    for (std::size_t i = 0; i + 1 < tensor->shape.size(); ++i)
      if (tensor->shape[i] != 1) return false;
    return true;
  }
  const List* list = value.as_list();
  if (!list || list->items.empty()) return false;
  return std::all_of(list->items.begin(), list->items.end(),
                     [](const Value& item) { return item.as_float() || item.as_int(); });
}

bool vector_list(const Value& value) {
  const List* list = value.as_list();
  return list && !list->items.empty() &&
         std::all_of(list->items.begin(), list->items.end(), vector_value);
}

bool vector_rows(const Value& value) {
  return matrix_like(value) || vector_list(value);
}

bool text_list(const Value& value) {
  const List* list = value.as_list();
  return list && !list->items.empty() &&
         std::all_of(list->items.begin(), list->items.end(),
                     [](const Value& item) { return item.as_string() != nullptr; });
}

std::uint64_t row_count(const Value& value) {
  if (const Tensor* tensor = value.as_tensor())
    return tensor->shape.empty() ? 0 : static_cast<std::uint64_t>(tensor->shape.front());
  if (const List* list = value.as_list()) return list->items.size();
  return 0;
}

// A value that holds `rows` rows of a column: a tensor [rows, ...], or a list of `rows` strings,
// numbers, tensors or lists of numbers.
bool column_of(const Value& value, std::uint64_t rows) {
  if (const Tensor* tensor = value.as_tensor())
    return !tensor->shape.empty() && static_cast<std::uint64_t>(tensor->shape.front()) == rows;
  const List* list = value.as_list();
  if (!list || list->items.size() != rows || rows == 0) return false;
  const Value& first = list->items.front();
  auto same_type = [&](auto&& test) {
    return std::all_of(list->items.begin(), list->items.end(), test);
  };
  if (first.as_string()) return same_type([](const Value& v) { return v.as_string() != nullptr; });
  if (first.as_tensor()) return same_type([](const Value& v) { return v.as_tensor() != nullptr; });
  if (first.as_int() || first.as_float())
    return same_type([](const Value& v) { return v.as_int() || v.as_float(); });
  if (first.as_list())
    return same_type([](const Value& v) {
      const List* row = v.as_list();
      return row && std::all_of(row->items.begin(), row->items.end(),
                                [](const Value& item) { return item.as_int() || item.as_float(); });
    });
  return false;
}

// A column name from a dict key or a file name: the key itself, changed only where it is no legal
// name (column.hpp legal_column_name; note_renamed_columns reports the change); empty for an empty
// key.
std::string column_name_for(std::string_view key) {
  return legal_column_name(key);
}

std::string describe_keys(const Dict& dict) {
  std::string text;
  std::size_t shown = 0;
  for (const auto& [key, value] : dict.items) {
    if (shown == 10) {
      text += ", ... (" + std::to_string(dict.items.size()) + " keys)";
      break;
    }
    text += (shown++ ? ", " : "") + escaped(key) + " (" + value_signature(value, 1, 2) + ")";
  }
  return text;
}

struct Candidate {
  std::string path;
  std::string description;
};

std::string candidate_list(const std::vector<Candidate>& candidates) {
  std::string text;
  for (const auto& candidate : candidates)
    text +=
        (text.empty() ? "" : ", ") + escaped(candidate.path) + " (" + candidate.description + ")";
  return text;
}

// Command-line flags inside a one-line message: as they are when they can be pasted, escaped and
// cut short when a path holds control characters or runs long (such flags cannot be pasted
// anyway, and a message must stay one short line).
std::string message_flags(SourceKind kind, const std::vector<FieldSpec>& fields) {
  const std::string flags = format_flags(kind, fields);
  const bool plain = flags.size() <= 256 && std::none_of(flags.begin(), flags.end(), [](char c) {
                       return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
                     });
  return plain ? flags : escaped(flags, 256);
}

// Flags for each way the candidates could be read, as full command-line fragments, on one line.
std::string suggestions(const std::vector<Candidate>& vectors,
                        const std::vector<Candidate>& texts) {
  if (vectors.empty()) return " No float tensor or list of numbers was found to use as embeddings.";
  std::vector<std::string> choices;
  const std::size_t shown = std::min<std::size_t>(vectors.size(), 3);
  for (std::size_t i = 0; i < shown; ++i) {
    std::vector<FieldSpec> fields{{"embedding", vectors[i].path}};
    if (!texts.empty()) fields.push_back({"text", texts.front().path});
    choices.push_back(message_flags(SourceKind::embeddings, fields));
  }
  if (vectors.size() >= 2) {
    std::vector<FieldSpec> fields{{"question_embedding", vectors[0].path},
                                  {"answer_embedding", vectors[1].path}};
    if (texts.size() >= 2) {
      fields.push_back({"question", texts[0].path});
      fields.push_back({"answer", texts[1].path});
    }
    choices.push_back(message_flags(SourceKind::dialogue, fields) +
                      " (if they are questions and answers)");
  }
  if (!texts.empty())
    choices.push_back(message_flags(
        SourceKind::llm_cache, {{"text", texts.front().path}, {"embedding", vectors[0].path}}));
  std::string text = " To choose, pass one of:";
  for (std::size_t i = 0; i < choices.size(); ++i) text += (i ? " | " : " ") + choices[i];
  return text;
}

class Detector {
 public:
  explicit Detector(const std::string& origin) : origin_(origin) {}

  // Every array of the dict, when all share one row count: the `tensors` layout.
  static std::optional<DetectedLayout> tensors_layout(const Dict& dict, const KeyPath& prefix,
                                                      const std::string& description);

  std::optional<DetectedLayout> node(const Value& value, const KeyPath& prefix, int depth) {
    if (depth > kMaxDepth) return std::nullopt;
    if (matrix_like(value))
      return DetectedLayout{SourceKind::embeddings,
                            {{"embedding", format_path(prefix)}},
                            "a " + tensor_text(*value.as_tensor())};
    if (const List* list = value.as_list()) {
      if (list->items.empty()) return std::nullopt;
      if (std::all_of(list->items.begin(), list->items.end(),
                      [](const Value& item) { return item.as_dict() != nullptr; }))
        return rows_of_dicts(*list, prefix);
      if (vector_list(value))
        return DetectedLayout{SourceKind::embeddings,
                              {{"embedding", format_path(prefix)}},
                              "a list of " + std::to_string(list->items.size()) + " vectors (" +
                                  value_signature(list->items.front()) + ")"};
      return std::nullopt;
    }
    if (const Dict* dict = value.as_dict()) return dict_layout(*dict, prefix, depth);
    return std::nullopt;
  }

 private:
  using Slots = std::array<std::vector<std::string>, slot_count>;

  Slots find_slots(const Dict& dict, const std::function<bool(const Value&)>& fits_text,
                   const std::function<bool(const Value&)>& fits_vector, const KeyPath& key_prefix,
                   const std::string& where) const {
    Slots slots;
    const auto& table = slot_table();
    for (const auto& [key, value] : dict.items) {
      const std::string name = lower(key);
      for (int slot = 0; slot < slot_count; ++slot) {
        const auto& info = table[slot];
        if (std::find(info.aliases.begin(), info.aliases.end(), name) == info.aliases.end())
          continue;
        if (info.is_vector ? fits_vector(value) : fits_text(value)) slots[slot].push_back(key);
      }
    }
    for (int slot = 0; slot < slot_count; ++slot) {
      if (slots[slot].size() < 2) continue;
      std::string keys, flags;
      for (const auto& key : slots[slot]) {
        keys += (keys.empty() ? "" : ", ") + escaped(key);
        const std::string path = format_path(with_key(key_prefix, key));
        std::string flag = format_field_flag({std::string(table[slot].column), path});
        if (flag.size() > 256 || std::any_of(flag.begin(), flag.end(), [](char c) {
              return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
            }))
          flag = escaped(flag, 256);
        flags += (flags.empty() ? " " : " | ") + flag;
      }
      throw Error(origin_, "layout",
                  where + " has " + std::to_string(slots[slot].size()) +
                      " keys that could be the " + std::string(table[slot].column) + " column (" +
                      keys + "); pick one:" + flags);
    }
    return slots;
  }

  // Columns named by recognised keys. `path_of` turns a key into its column path;
  // `per_row_vectors` says whether the embedding holds one vector per row (an LLM cache when
  // texts come with them) rather than one [N, D] matrix.
  static std::optional<DetectedLayout> from_slots(
      const Slots& slots, const std::function<std::string(const std::string&)>& path_of,
      bool per_row_vectors, std::string description) {
    auto field = [&](Slot slot) {
      return FieldSpec{std::string(slot_table()[slot].column), path_of(slots[slot].front())};
    };
    if (!slots[question_embedding].empty() && !slots[answer_embedding].empty()) {
      DetectedLayout layout{SourceKind::dialogue,
                            {field(question_embedding), field(answer_embedding)},
                            std::move(description)};
      if (!slots[question].empty()) layout.fields.push_back(field(question));
      if (!slots[answer].empty()) layout.fields.push_back(field(answer));
      return layout;
    }
    if (!slots[embedding].empty()) {
      const bool with_text = !slots[text].empty();
      DetectedLayout layout{
          with_text && per_row_vectors ? SourceKind::llm_cache : SourceKind::embeddings,
          {},
          std::move(description)};
      if (with_text) layout.fields.push_back(field(text));
      layout.fields.push_back(field(embedding));
      return layout;
    }
    return std::nullopt;
  }

  // A field found by what it holds (the one block of float vectors, the one list of strings)
  // under a key that need not name a standard column: it fills `standard` under the key's own
  // name (names are the user's, issue #27). A key of which no legal name is left, or whose name
  // another standard column of the layout has, gets the standard name.
  static void add_own_name(DetectedLayout& layout, std::string_view standard,
                           const std::string& key, const std::string& path) {
    std::string name = column_name_for(key);
    const bool taken = name == "text" || name == "embedding";
    if (name.empty() || (taken && name != standard)) name = std::string(standard);
    if (layout.fills.count(name)) name = std::string(standard);
    layout.fields.push_back({name, path});
    if (name != standard) layout.fills[name] = std::string(standard);
  }

  std::optional<DetectedLayout> rows_of_dicts(const List& list, const KeyPath& prefix) {
    const Dict& first = *list.items.front().as_dict();
    const KeyPath rows = with_wildcard(prefix);
    auto path_of = [&](const std::string& key) { return format_path(with_key(rows, key)); };
    const std::string description = "a list of " + std::to_string(list.items.size()) +
                                    " dicts with keys " + describe_keys(first);
    const auto is_text = [](const Value& value) { return value.as_string() != nullptr; };
    const Slots slots =
        find_slots(first, is_text, vector_value, rows,
                   "the dicts in " + quoted(format_path(prefix), kShownChars, '\''));
    if (auto layout = from_slots(slots, path_of, true, description)) return layout;

    // Unknown key names: one vector (and at most one string) per row is still unambiguous.
    std::vector<std::string> vectors, texts;
    for (const auto& [key, value] : first.items) {
      if (vector_value(value)) vectors.push_back(key);
      if (value.as_string()) texts.push_back(key);
    }
    if (vectors.size() == 1) {
      DetectedLayout layout{
          texts.size() == 1 ? SourceKind::llm_cache : SourceKind::embeddings, {}, description};
      if (texts.size() == 1) add_own_name(layout, "text", texts.front(), path_of(texts.front()));
      add_own_name(layout, "embedding", vectors.front(), path_of(vectors.front()));
      return layout;
    }
    if (vectors.size() >= 2) {
      std::vector<Candidate> vector_candidates, text_candidates;
      for (const auto& key : vectors)
        vector_candidates.push_back({path_of(key), value_signature(*first.find(key))});
      for (const auto& key : texts) text_candidates.push_back({path_of(key), "str"});
      throw Error(origin_, "layout",
                  "found " + description + "; " + std::to_string(vectors.size()) +
                      " of those keys hold vectors, under names that do not say which column each "
                      "is." +
                      suggestions(vector_candidates, text_candidates));
    }
    return numbered_rows(first, path_of, description);
  }

  // Rows without a float vector (token ids and their text, labels, per-row tensors): every key
  // whose value makes a column becomes one, the `tensors` layout, when one of them holds numbers.
  // Lists of ints and 1-D int tensors of varying length map to sequence columns.
  static std::optional<DetectedLayout> numbered_rows(
      const Dict& first, const std::function<std::string(const std::string&)>& path_of,
      const std::string& description) {
    DetectedLayout layout{SourceKind::tensors, {}, description};
    std::unordered_set<std::string> names;
    bool numbers = false;
    for (const auto& [key, value] : first.items) {
      const bool text = value.as_string() != nullptr;
      const List* list = value.as_list();
      const bool numeric =
          value.as_tensor() || value.as_int() || value.as_float() ||
          (list && std::all_of(list->items.begin(), list->items.end(),
                               [](const Value& item) { return item.as_int() || item.as_float(); }));
      const std::string name = column_name_for(key);
      if ((!text && !numeric) || name.empty() || !names.insert(name).second) continue;
      numbers |= numeric;
      layout.fields.push_back({name, path_of(key)});
    }
    if (!numbers) return std::nullopt;
    return layout;
  }

  std::optional<DetectedLayout> dict_layout(const Dict& dict, const KeyPath& prefix, int depth) {
    if (dict.items.empty()) return std::nullopt;
    auto path_of = [&](const std::string& key) { return format_path(with_key(prefix, key)); };
    const std::string here =
        prefix.empty() ? "the root" : quoted(format_path(prefix), kShownChars, '\'');
    const std::string description =
        (prefix.empty() ? "a dict" : "a dict at " + here) + " with keys " + describe_keys(dict);

    // Parallel columns under recognised names.
    const Slots slots = find_slots(dict, text_list, vector_rows, prefix, here);
    if (!slots[embedding].empty() ||
        (!slots[question_embedding].empty() && !slots[answer_embedding].empty())) {
      const bool per_row =
          !slots[embedding].empty() && !dict.find(slots[embedding].front())->as_tensor();
      return with_extra_columns(from_slots(slots, path_of, per_row, description), dict, prefix);
    }

    // text -> vector: an LLM cache keyed by the text that produced each embedding.
    if (std::all_of(dict.items.begin(), dict.items.end(),
                    [](const auto& item) { return vector_value(item.second); })) {
      return DetectedLayout{SourceKind::llm_cache,
                            {{"text", format_path(with_keys(prefix))},
                             {"embedding", format_path(with_wildcard(prefix))}},
                            "a dict of " + std::to_string(dict.items.size()) +
                                " str -> vector entries (" +
                                value_signature(dict.items.front().second) + ")"};
    }

    // Any single block of vectors, under any key.
    std::vector<std::string> blocks, texts;
    for (const auto& [key, value] : dict.items) {
      if (vector_rows(value)) blocks.push_back(key);
      if (text_list(value)) texts.push_back(key);
    }
    if (blocks.size() == 1) {
      const Value& block = *dict.find(blocks.front());
      std::optional<std::string> text_key;
      if (!slots[text].empty()) {
        text_key = slots[text].front();
      } else if (texts.size() == 1 && row_count(*dict.find(texts.front())) == row_count(block)) {
        text_key = texts.front();
      }
      DetectedLayout layout{
          text_key && block.as_list() ? SourceKind::llm_cache : SourceKind::embeddings,
          {},
          description};
      if (text_key) add_own_name(layout, "text", *text_key, path_of(*text_key));
      add_own_name(layout, "embedding", blocks.front(), path_of(blocks.front()));
      return with_extra_columns(std::move(layout), dict, prefix);
    }
    if (blocks.size() > 1) {
      std::vector<Candidate> vector_candidates, text_candidates;
      for (const auto& key : blocks)
        vector_candidates.push_back({path_of(key), value_signature(*dict.find(key))});
      for (const auto& key : texts)
        text_candidates.push_back({path_of(key), value_signature(*dict.find(key))});
      throw Error(origin_, "layout",
                  here + " holds " + std::to_string(blocks.size()) +
                      " blocks of vectors that could be the embeddings: " +
                      candidate_list(vector_candidates) + "." +
                      suggestions(vector_candidates, text_candidates));
    }

    // Arrays sharing their first dimension: images, labels, keypoints, ... one column each.
    if (auto layout = tensors_layout(dict, prefix, description)) return layout;

    // Nothing at this level: one (and only one) child may hold the dataset.
    std::vector<std::pair<std::string, DetectedLayout>> found;
    for (const auto& [key, value] : dict.items) {
      if (!value.as_dict() && !value.as_list()) continue;
      if (auto layout = node(value, with_key(prefix, key), depth + 1))
        found.emplace_back(key, std::move(*layout));
    }
    if (found.size() == 1) return std::move(found.front().second);
    if (found.size() > 1) {
      std::string text =
          here + " holds " + std::to_string(found.size()) + " candidate datasets; pick one:";
      for (std::size_t i = 0; i < found.size(); ++i) {
        const DetectedLayout& layout = found[i].second;
        text += (i ? " | " : " ") + message_flags(layout.kind, layout.fields) + " (" +
                layout.description + ")";
      }
      throw Error(origin_, "layout", text);
    }
    return std::nullopt;
  }

  // The other arrays of `dict` with the layout's row count become extra columns, named after
  // their keys (keys that make no column name, or clash with one, are left out).
  static std::optional<DetectedLayout> with_extra_columns(std::optional<DetectedLayout> layout,
                                                          const Dict& dict, const KeyPath& prefix) {
    if (!layout) return layout;
    const Value* first_column = nullptr;
    std::vector<std::string> used;
    for (const auto& field : layout->fields) {
      used.push_back(field.column);
      for (const auto& [key, value] : dict.items)
        if (format_path(with_key(prefix, key)) == field.path) {
          used.push_back("key:" + key);
          if (!first_column) first_column = &value;
        }
    }
    if (!first_column) return layout;  // rows spread over a list of dicts: no parallel arrays
    const std::uint64_t rows = row_count(*first_column);
    for (const auto& [key, value] : dict.items) {
      const std::string name = column_name_for(key);
      if (name.empty() || !column_of(value, rows) ||
          std::find(used.begin(), used.end(), "key:" + key) != used.end() ||
          std::find(used.begin(), used.end(), name) != used.end())
        continue;
      layout->fields.push_back({name, format_path(with_key(prefix, key))});
      used.push_back(name);
    }
    return layout;
  }

  const std::string& origin_;
};

std::optional<DetectedLayout> Detector::tensors_layout(const Dict& dict, const KeyPath& prefix,
                                                       const std::string& description) {
  // The row count is the first array of numbers'; every array of numbers must have it. Lists of
  // strings of another length are metadata (class names, say), left out.
  std::optional<std::uint64_t> rows;
  for (const auto& [key, value] : dict.items)
    if (value.as_tensor() || (value.as_list() && !text_list(value))) {
      rows = row_count(value);
      break;
    }
  if (!rows || *rows == 0) return std::nullopt;
  DetectedLayout layout{SourceKind::tensors, {}, description};
  // A set, not a list searched each time: a safetensors file may hold 10^6 tensors.
  std::unordered_set<std::string> names;
  for (const auto& [key, value] : dict.items) {
    if (!value.as_tensor() && !value.as_list()) continue;  // metadata: scalars, strings, dicts
    if (text_list(value) && row_count(value) != *rows) continue;
    if (!column_of(value, *rows)) return std::nullopt;
    const std::string name = column_name_for(key);
    if (name.empty() || !names.insert(name).second) return std::nullopt;
    layout.fields.push_back({name, format_path(with_key(prefix, key))});
  }
  return layout;
}

// Every path that could be a column, for the "nothing recognised" message.
void collect(const Value& value, const KeyPath& path, int depth, std::vector<Candidate>& vectors,
             std::vector<Candidate>& texts) {
  if (depth > kMaxDepth || vectors.size() + texts.size() > 20) return;
  if (vector_rows(value)) {
    vectors.push_back({format_path(path), value_signature(value)});
    return;
  }
  if (text_list(value)) {
    texts.push_back({format_path(path), value_signature(value)});
    return;
  }
  if (const Dict* dict = value.as_dict()) {
    for (const auto& [key, item] : dict->items)
      collect(item, with_key(path, key), depth + 1, vectors, texts);
    return;
  }
  const List* list = value.as_list();
  if (!list || list->items.empty()) return;
  if (const Dict* first = list->items.front().as_dict()) {
    const KeyPath rows = with_wildcard(path);
    for (const auto& [key, item] : first->items) {
      if (vector_value(item))
        vectors.push_back({format_path(with_key(rows, key)), value_signature(item)});
      if (item.as_string()) texts.push_back({format_path(with_key(rows, key)), "str"});
    }
  }
}

}  // namespace

std::optional<DetectedLayout> detect_tensor_columns(const Value& root, const std::string& origin) {
  if (const Dict* dict = root.as_dict())
    return Detector::tensors_layout(*dict, {}, "a dict with keys " + describe_keys(*dict));
  // One array on its own (an images.npy, or a numpy string array such as texts.npy, read as a
  // list of str): one column, named after the file.
  auto file_column = [&] {
    std::string stem = origin.substr(origin.find_last_of('/') + 1);
    stem = stem.substr(0, stem.find('.'));
    const std::string name = column_name_for(stem);
    return name.empty() ? std::string("data") : name;
  };
  if (const Tensor* tensor = root.as_tensor(); tensor && !tensor->shape.empty())
    return DetectedLayout{SourceKind::tensors, {{file_column(), "."}}, "a " + tensor_text(*tensor)};
  if (text_list(root))
    return DetectedLayout{SourceKind::tensors, {{file_column(), "."}}, value_signature(root)};
  return std::nullopt;
}

std::string column_name_from_key(std::string_view key) {
  return column_name_for(key);
}

DetectedLayout detect_layout(const Value& root, const std::string& origin) {
  if (auto layout = Detector(origin).node(root, {}, 0)) return std::move(*layout);
  if (root.as_tensor() || text_list(root))
    if (auto layout = detect_tensor_columns(root, origin)) return std::move(*layout);
  std::vector<Candidate> vectors, texts;
  collect(root, {}, 0, vectors, texts);
  std::string found = "found " + value_signature(root, 2, 3);
  if (!vectors.empty() || !texts.empty())
    found += "; columns it could hold: " + candidate_list(vectors) +
             (vectors.empty() || texts.empty() ? "" : ", ") + candidate_list(texts);
  throw Error(origin, "layout",
              "no known layout (dialogue, embeddings, llm-cache or tensors): " + found + "." +
                  suggestions(vectors, texts));
}

}  // namespace gpucache::detail
