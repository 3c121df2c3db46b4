// Reads JSON lines: one object per line, parsed with nlohmann's SAX interface straight into the
// Value tree. Numeric arrays never become a Value per number: their elements go into one arena
// per element type for the whole file (f32, or i64 for arrays of integer literals), and each
// array becomes a 1-D tensor viewing its slice of it, so a million 384-d embeddings cost one
// growing buffer, not 384 million variant nodes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpucache/common/error_text.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/jsonl.hpp"

namespace gpucache {
namespace {

using Json = nlohmann::json;

// Objects and arrays nest at most this deep: the tree is freed recursively, and no dataset row
// nests deeper (Python's json module stops near 1000 on its recursion limit).
constexpr std::size_t kMaxDepth = 256;

// Where a file's numeric arrays live until the file is read: one buffer per element type.
// Whether an array is i64 or f32 is decided per key path over the whole file (every row's
// "tokens", say), not per array: a column must have one dtype, and a row of token ids that
// happens to be empty, or an embedding whose values happen to be whole, must not differ from
// its column. A path is i64 when every number under it, in every row, is an integer literal.
struct Arenas {
  std::vector<float> floats;
  std::vector<std::int64_t> integers;
  struct Pending {
    std::shared_ptr<Tensor> tensor;
    std::uint32_t path;
    bool integers;  // its numbers are in `integers` (else in `floats`, or it is empty)
  };
  // Tensors get their dtype and storage once the arenas stop growing and their addresses are
  // final.
  std::vector<Pending> tensors;
  std::unordered_map<std::string, std::uint32_t> path_ids;
  std::vector<bool> path_has_fraction;  // by path id: some number is not an integer literal

  std::uint32_t path_id(std::string path) {
    const auto [found, added] =
        path_ids.try_emplace(std::move(path), static_cast<std::uint32_t>(path_has_fraction.size()));
    if (added) path_has_fraction.push_back(false);
    return found->second;
  }
};

class LineBuilder : public nlohmann::json_sax<Json> {
 public:
  LineBuilder(const std::string& path, Arenas& arenas) : path_(path), arenas_(arenas) {}

  void start_line(std::uint64_t line_number, std::string_view text) {
    line_ = line_number;
    text_ = text;
    frames_.clear();
    result_.reset();
  }
  std::shared_ptr<Dict> take_result() { return std::move(result_); }

  bool null() override { return scalar(Value(), "null"); }
  bool boolean(bool value) override { return scalar(Value(value), "bool"); }
  bool number_integer(number_integer_t value) override {
    return number(static_cast<double>(value), Value(std::int64_t{value}), {}, value);
  }
  bool number_unsigned(number_unsigned_t value) override {
    // Integers beyond int64 stay numbers, as Python's json module would keep them; in an array
    // they count as non-integers (the array is f32).
    if (value > static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max()))
      return number(static_cast<double>(value), Value(static_cast<double>(value)), {});
    return number(static_cast<double>(value), Value(static_cast<std::int64_t>(value)), {},
                  static_cast<std::int64_t>(value));
  }
  bool number_float(number_float_t value, const string_t& text) override {
    if (!std::isfinite(value))
      fail(location() + " = " + detail::escaped(text, 32) + " is not a finite number");
    return number(value, Value(value), text);
  }
  bool string(string_t& value) override { return scalar(Value(std::move(value)), "str"); }
  bool binary(binary_t&) override { fail("binary values are not JSON"); }

  bool start_object(std::size_t) override {
    if (!frames_.empty() && frames_.back().kind == Frame::array) note_array_element("dict");
    check_depth();
    frames_.push_back(Frame{.kind = Frame::object});
    frames_.back().dict = std::make_shared<Dict>();
    return true;
  }
  bool key(string_t& name) override {
    Frame& frame = frames_.back();
    // Linear search is fastest for the usual handful of keys; a line holding a whole text ->
    // vector cache can have a million, so large objects switch to a hash set.
    bool repeated;
    if (frame.dict->items.size() < kLinearKeys) {
      repeated = frame.dict->find(name) != nullptr;
    } else {
      if (!frame.keys) {
        frame.keys = std::make_unique<std::unordered_set<std::string>>();
        for (const auto& [existing, value] : frame.dict->items) frame.keys->insert(existing);
      }
      repeated = !frame.keys->insert(name).second;
    }
    if (repeated) fail("key " + detail::quoted(name) + " appears twice");
    frame.key = std::move(name);
    return true;
  }
  bool end_object() override {
    auto dict = std::move(frames_.back().dict);
    frames_.pop_back();
    if (frames_.empty()) {
      result_ = std::move(dict);
      return true;
    }
    return emit(Value(std::move(dict)));
  }

  bool start_array(std::size_t) override {
    if (frames_.empty()) fail("expected a JSON object, found an array");
    if (frames_.back().kind == Frame::array) {
      note_array_element("array");
      fail("nested arrays are not supported: " + location() +
           " is an array inside an array; write one embedding per line as a flat array");
    }
    check_depth();
    frames_.push_back(Frame{.kind = Frame::array});
    frames_.back().first_number = arenas_.floats.size();
    frames_.back().first_integer = arenas_.integers.size();
    return true;
  }
  bool end_array() override {
    Frame frame = std::move(frames_.back());
    frames_.pop_back();
    if (frame.element_type.empty() || frame.element_type == "number") {
      // Each number went to both arenas; the array keeps one copy. Its dtype is its path's,
      // known when the file is read (Arenas).
      const bool integers = frame.count > 0 && frame.all_integers;
      auto tensor = std::make_shared<Tensor>();
      tensor->dtype = integers ? DType::i64 : DType::f32;
      tensor->shape = {static_cast<std::int64_t>(frame.count)};
      tensor->strides = {1};
      if (integers) {
        arenas_.floats.resize(frame.first_number);
        tensor->storage_offset = static_cast<std::int64_t>(frame.first_integer);
      } else {
        arenas_.integers.resize(frame.first_integer);
        tensor->storage_offset = static_cast<std::int64_t>(frame.first_number);
      }
      const std::uint32_t path = arenas_.path_id(array_path());
      if (frame.count > 0 && !integers) arenas_.path_has_fraction[path] = true;
      arenas_.tensors.push_back({tensor, path, integers});
      return emit(Value(std::move(tensor)));
    }
    return emit(Value(std::move(frame.list)));
  }

  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& error) override {
    // nlohmann's message starts with an exception id and counts lines and columns within the
    // single line it was given; keep only the description.
    std::string cause = error.what();
    if (cause.starts_with("[json.exception")) cause.erase(0, cause.find("] ") + 2);
    if (cause.starts_with("parse error at line 1, column ")) cause.erase(0, cause.find(": ") + 2);
    cause = detail::escaped(cause, 200);  // "last read: '...'" may quote a megabyte of the line
    // Python's json.dumps writes NaN and Infinity unless told not to; say so when that is the
    // cause.
    const std::size_t at = std::min(position, text_.size());
    const std::string_view near = text_.substr(at > 10 ? at - 10 : 0, 20);
    std::string hint;
    if (near.find("NaN") != std::string_view::npos ||
        near.find("Infinity") != std::string_view::npos)
      hint = " (NaN and Infinity are not valid JSON numbers: non-finite values cannot be stored)";
    throw Error(path_, "line " + std::to_string(line_) + ", column " + std::to_string(position),
                "not valid JSON: " + cause + hint);
  }

 private:
  struct Frame {
    enum Kind { object, array } kind;
    std::shared_ptr<Dict> dict{};     // object
    std::string key{};                // object: key of the value being parsed
    std::shared_ptr<List> list{};     // array of non-numbers
    std::string element_type{};       // array: type of its first element, "" while empty
    std::uint64_t first_number = 0;   // array: where its numbers start in the f32 arena
    std::uint64_t first_integer = 0;  // array: ... and in the i64 arena
    bool all_integers = true;         // array: every number so far an integer literal
    std::uint64_t count = 0;          // array: elements so far
    std::unique_ptr<std::unordered_set<std::string>> keys{};  // object: keys, once it is large
  };
  static constexpr std::size_t kLinearKeys = 32;

  // `integer`: the value of an integer literal within int64. Until its array ends it is not
  // known whether the array holds only integers, so each number goes to both arenas and
  // end_array keeps one.
  bool number(double as_double, Value as_value, std::string_view text,
              std::optional<std::int64_t> integer = std::nullopt) {
    if (frames_.empty() || frames_.back().kind == Frame::object)
      return scalar(std::move(as_value), "number");
    note_array_element("number");
    Frame& frame = frames_.back();
    if (integer) {
      arenas_.integers.push_back(*integer);
    } else {
      frame.all_integers = false;
      arenas_.integers.push_back(0);
    }
    // Only fractions and exponents reach beyond f32: every 64-bit integer fits its range.
    if (std::fabs(as_double) > std::numeric_limits<float>::max())
      fail(location() + " = " + detail::escaped(text, 32) + " does not fit in f32");
    arenas_.floats.push_back(static_cast<float>(as_double));
    return true;
  }

  void check_depth() const {
    if (frames_.size() >= kMaxDepth)
      fail("objects and arrays nest deeper than " + std::to_string(kMaxDepth) + " levels");
  }

  bool scalar(Value value, std::string_view type) {
    if (frames_.empty()) fail("expected a JSON object, found a " + std::string(type));
    if (frames_.back().kind == Frame::object) return emit(std::move(value));
    note_array_element(type);
    return emit(std::move(value));
  }

  // Arrays hold one kind of element: numbers (a vector), or strings, bools, nulls or objects.
  void note_array_element(std::string_view type) {
    Frame& frame = frames_.back();
    ++frame.count;
    if (frame.element_type.empty()) {
      frame.element_type = type;
      if (type != "number") frame.list = std::make_shared<List>();
    } else if (frame.element_type != type) {
      fail(location() + " mixes " + frame.element_type + " and " + std::string(type) +
           " elements; an array must hold one type");
    }
  }

  bool emit(Value value) {
    Frame& frame = frames_.back();
    if (frame.kind == Frame::object)
      frame.dict->items.emplace_back(std::move(frame.key), std::move(value));
    else
      frame.list->items.push_back(std::move(value));
    return true;
  }

  // The key path of the array just closed, array indices left out ("turns[].embedding"): the
  // same for that array in every row. Keys are kept whole, each behind a separator byte.
  std::string array_path() const {
    std::string text;
    for (const auto& frame : frames_) {
      if (frame.kind == Frame::object) {
        text += '\x01';
        text += frame.key;
      } else {
        text += '\x02';
      }
    }
    return text;
  }

  // Where the parser is, as a key path: question_embedding[3].
  std::string location() const {
    std::string text;
    for (const auto& frame : frames_) {
      if (frame.kind == Frame::object) {
        if (!text.empty()) text += '.';
        text += detail::escaped(frame.key, detail::kShownChars, '"');
      } else {
        text += "[" + std::to_string(frame.count == 0 ? 0 : frame.count - 1) + "]";
      }
    }
    return text.empty() ? std::string("the line") : "\"" + text + "\"";
  }

  [[noreturn]] void fail(const std::string& cause) const {
    throw Error(path_, "line " + std::to_string(line_), cause);
  }

  const std::string& path_;
  Arenas& arenas_;
  std::uint64_t line_ = 0;
  std::string_view text_;
  std::vector<Frame> frames_;
  std::shared_ptr<Dict> result_;
};

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// Bytes nlohmann would let through although a line must be exactly one JSON object: a NUL (its
// lexer takes one for the end of the input, so '{...}\0garbage' would parse) and a byte-order
// mark (skipped at the start of every input it is given, here every line; only the file may
// start with one).
void check_line_bytes(std::string_view line, std::uint64_t line_number, const std::string& path) {
  if (line.starts_with("\xEF\xBB\xBF"))
    throw Error(path, "line " + std::to_string(line_number),
                "starts with a byte-order mark; only the file's first line may");
  if (const auto nul = line.find('\0'); nul != std::string_view::npos)
    throw Error(path, "line " + std::to_string(line_number) + ", column " + std::to_string(nul + 1),
                "not valid JSON: a NUL byte; nothing may follow the object but spaces");
}

}  // namespace

Value read_jsonl(const std::string& path, const ReadOptions&) {
  auto file = detail::MappedFile::open(path);
  std::string_view text(reinterpret_cast<const char*>(file->data()), file->size());
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte-order mark

  Arenas arenas;
  LineBuilder builder(path, arenas);
  auto rows = std::make_shared<List>();
  std::uint64_t line_number = 0;
  while (!text.empty()) {
    const auto newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (is_blank(line)) continue;
    check_line_bytes(line, line_number, path);
    builder.start_line(line_number, line);
    Json::sax_parse(line.begin(), line.end(), &builder);
    auto row = builder.take_result();
    if (!row) throw Error(path, "line " + std::to_string(line_number), "is not a JSON object");
    rows->items.emplace_back(std::move(row));
  }

  // A path with a fraction anywhere is f32 throughout: its integer arrays are converted (an
  // integer literal in an f32 array is read as a number, as before). Empty arrays take their
  // path's dtype; a path of empty arrays only is f32.
  std::vector<bool> path_has_integers(arenas.path_has_fraction.size(), false);
  for (const auto& pending : arenas.tensors)
    if (pending.integers) path_has_integers[pending.path] = true;
  for (auto& pending : arenas.tensors) {
    Tensor& tensor = *pending.tensor;
    const bool i64 = path_has_integers[pending.path] && !arenas.path_has_fraction[pending.path];
    tensor.dtype = i64 ? DType::i64 : DType::f32;
    if (pending.integers && !i64) {
      const auto first = static_cast<std::size_t>(tensor.storage_offset);
      const auto count = static_cast<std::size_t>(tensor.shape[0]);
      tensor.storage_offset = static_cast<std::int64_t>(arenas.floats.size());
      for (std::size_t i = 0; i < count; ++i)
        arenas.floats.push_back(static_cast<float>(arenas.integers[first + i]));
      pending.integers = false;
    } else if (tensor.shape[0] == 0) {
      tensor.storage_offset = 0;
      pending.integers = i64;
    }
  }
  auto give_storage = [](auto& arena, const std::vector<Arenas::Pending>& tensors, bool integers) {
    auto owned = std::make_shared<std::remove_reference_t<decltype(arena)>>(std::move(arena));
    auto storage = std::make_shared<Storage>();
    storage->bytes = std::as_bytes(std::span(*owned));
    storage->owner = owned;
    for (const auto& pending : tensors)
      if (pending.integers == integers) pending.tensor->storage = storage;
  };
  give_storage(arenas.floats, arenas.tensors, false);
  give_storage(arenas.integers, arenas.tensors, true);
  return Value(std::move(rows));
}

}  // namespace gpucache
