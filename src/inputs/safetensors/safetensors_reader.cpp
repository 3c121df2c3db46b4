// Reads .safetensors files (huggingface/safetensors): an 8-byte little-endian header length, a
// JSON header, then the tensors' raw bytes. The file is trusted for nothing: every check the
// reference implementation makes is made here, plus a few it skips (duplicate keys, unknown
// fields). The header is parsed in one pass of SAX events straight into the tensor entries, in
// time linear in its size (a header may list a million tensors). Tensors point straight into the
// memory map. FORMAT.md lists what is accepted.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpucache/common/byte_reader.hpp"
#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/common/error_text.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/safetensors.hpp"

namespace gpucache {
namespace {

using Json = nlohmann::json;  // its SAX interface only: no document is built

// The reference implementation's cap: a larger header is a hostile or corrupt file.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";

// The names safetensors files may carry: the dtype table's (gpucache/common/dtype_formats.hpp).
std::string accepted_dtypes() {
  std::string text;
  for (const auto& info : dtype_table()) {
    if (!text.empty()) text += ", ";
    text += info.safetensors;
  }
  return text;
}

struct TensorEntry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

std::string tensor_location(std::string_view name) {
  return "tensor " + detail::quoted(name, detail::kShownChars, '\'');
}

// The header as SAX events: the root object's keys are tensor names (and __metadata__), each
// with an object of exactly dtype, shape and data_offsets. Anything else fails at the event that
// shows it, so nothing deeper than [root, entry, shape] is ever held.
class HeaderParser final : public nlohmann::json_sax<Json> {
 public:
  explicit HeaderParser(const std::string& path) : path_(path) {}

  std::vector<TensorEntry> entries;
  std::optional<std::vector<std::pair<std::string, std::string>>> metadata;

  bool null() override { return scalar("null"); }
  bool boolean(bool value) override { return scalar(value ? "true" : "false"); }
  bool number_integer(number_integer_t value) override {
    // Only "-0" reaches here as a non-negative integer: serde, the reference's parser, reads it
    // as 0.
    if (value == 0 && in_array()) return unsigned_element(0, "-0");
    return scalar("number " + std::to_string(value));
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (in_array()) return unsigned_element(value, std::to_string(value));
    return scalar("number " + std::to_string(value));
  }
  bool number_float(number_float_t, const string_t& text) override {
    return scalar("number " + detail::escaped(text, 32));
  }
  bool string(string_t& value) override {
    if (state_ == State::entry_value && field_ == Field::dtype) {
      dtype_text_ = std::move(value);
      have_dtype_ = true;
      state_ = State::entry_key;
      return true;
    }
    if (state_ == State::metadata_value) {
      metadata->emplace_back(std::move(metadata_key_), std::move(value));
      state_ = State::metadata_key;
      return true;
    }
    return scalar("string " + detail::quoted(value));
  }
  bool binary(binary_t&) override { fail("header", "binary values are not JSON"); }

  bool start_object(std::size_t) override {
    switch (state_) {
      case State::root:
        state_ = State::tensor_key;
        return true;
      case State::tensor_value:
        if (name_ == "__metadata__") {
          metadata.emplace();
          state_ = State::metadata_key;
        } else {
          entries.emplace_back();
          entries.back().name = std::move(name_);
          have_dtype_ = false;
          have_shape_ = false;
          have_offsets_ = false;
          state_ = State::entry_key;
        }
        return true;
      default:
        return scalar("object");
    }
  }
  bool key(string_t& name) override {
    if (state_ == State::tensor_key) {
      name_ = std::move(name);
      if (name_ == "__metadata__" && seen_metadata_)
        fail("header", "key \"__metadata__\" appears twice");
      seen_metadata_ = seen_metadata_ || name_ == "__metadata__";
      state_ = State::tensor_value;
      return true;
    }
    if (state_ == State::metadata_key) {
      metadata_key_ = std::move(name);
      state_ = State::metadata_value;
      return true;
    }
    // An entry's field; the value it had (have_...) is set once the value is read.
    bool seen;
    if (name == "dtype") {
      field_ = Field::dtype;
      seen = have_dtype_;
    } else if (name == "shape") {
      field_ = Field::shape;
      seen = have_shape_;
    } else if (name == "data_offsets") {
      field_ = Field::offsets;
      seen = have_offsets_;
    } else {
      fail(where(), "has an unknown field " + detail::quoted(name));
    }
    if (seen) fail(where(), "key " + detail::quoted(name) + " appears twice");
    state_ = State::entry_value;
    return true;
  }
  bool end_object() override {
    if (state_ == State::metadata_key) {
      state_ = State::tensor_key;
      return true;
    }
    if (state_ == State::entry_key) {
      if (!have_dtype_) fail(where(), "has no \"dtype\" field");
      if (!have_shape_) fail(where(), "has no \"shape\" field");
      if (!have_offsets_) fail(where(), "has no \"data_offsets\" field");
      finish_dtype();
      state_ = State::tensor_key;
      return true;
    }
    state_ = State::done;  // the root
    return true;
  }
  bool start_array(std::size_t) override {
    if (state_ == State::entry_value && field_ != Field::dtype) {
      state_ = field_ == Field::shape ? State::shape : State::offsets;
      offsets_count_ = 0;
      return true;
    }
    return scalar("array");
  }
  bool end_array() override {
    if (state_ == State::shape) {
      have_shape_ = true;
    } else {
      if (offsets_count_ != 2)
        fail(where(), "data_offsets must be an array [begin, end], found " +
                          std::to_string(offsets_count_) + " values");
      have_offsets_ = true;
      TensorEntry& entry = entries.back();
      if (entry.begin > entry.end)
        fail(where(), "data_offsets [" + std::to_string(entry.begin) + ", " +
                          std::to_string(entry.end) + ") end before they begin");
    }
    state_ = State::entry_key;
    return true;
  }

  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& error) override {
    // Drop nlohmann's exception id; its "line 1, column N" is the byte within the header.
    std::string cause = error.what();
    if (cause.starts_with("[json.exception")) cause.erase(0, cause.find("] ") + 2);
    fail("header", "is not valid JSON: " + detail::escaped(cause, 200));
  }

 private:
  enum class State {
    root,
    tensor_key,
    tensor_value,
    entry_key,
    entry_value,
    shape,
    offsets,
    metadata_key,
    metadata_value,
    done
  };
  enum class Field { dtype, shape, offsets };

  [[noreturn]] void fail(const std::string& location, const std::string& cause) const {
    throw Error(path_, location, cause);
  }
  std::string where() const { return tensor_location(entries.back().name); }
  bool in_array() const { return state_ == State::shape || state_ == State::offsets; }
  bool unsigned_element(std::uint64_t value, const std::string& text) {
    TensorEntry& entry = entries.back();
    if (state_ == State::shape) {
      if (value > std::uint64_t{std::numeric_limits<std::int64_t>::max()})
        fail(where(), "shape must hold non-negative integers below 2^63, found number " + text);
      entry.shape.push_back(static_cast<std::int64_t>(value));
    } else {
      if (offsets_count_ == 0) entry.begin = value;
      if (offsets_count_ == 1) entry.end = value;
      ++offsets_count_;
    }
    return true;
  }

  // A value where it does not belong, described by `shown` (its type, and its text made safe).
  bool scalar(const std::string& shown) {
    switch (state_) {
      case State::root:  // unreachable: check_header_text saw the '{'
        fail("header", "must be a JSON object, found " + shown);
      case State::tensor_value:
        if (name_ == "__metadata__") {
          if (shown == "null") {  // Option<...> in the reference: absent
            state_ = State::tensor_key;
            return true;
          }
          fail("header __metadata__", "must be a JSON object, found " + shown);
        }
        fail(tensor_location(name_), "must be a JSON object, found " + shown);
      case State::metadata_value:
        fail("header __metadata__",
             "value of " + detail::quoted(metadata_key_) + " must be a string, found " + shown);
      case State::entry_value:
        if (field_ == Field::dtype) fail(where(), "dtype must be a string, found " + shown);
        if (field_ == Field::shape) fail(where(), "shape must be an array, found " + shown);
        fail(where(), "data_offsets must be an array [begin, end], found " + shown);
      case State::shape:
        fail(where(), "shape must hold non-negative integers below 2^63, found " + shown);
      case State::offsets:
        fail(where(), "data_offsets must hold non-negative integers, found " + shown);
      default:
        fail("header", "unexpected " + shown);
    }
  }

  void finish_dtype() {
    TensorEntry& entry = entries.back();
    const auto known = dtype_from_safetensors(dtype_text_);
    if (!known)
      fail(where(), "dtype " + detail::quoted(dtype_text_) +
                        " is not supported (accepted: " + accepted_dtypes() + ")");
    entry.dtype = *known;
  }

  const std::string& path_;
  State state_ = State::root;
  Field field_ = Field::dtype;
  std::string name_;          // the tensor key being read
  std::string metadata_key_;  // the __metadata__ key being read
  std::string dtype_text_;
  bool have_dtype_ = false, have_shape_ = false, have_offsets_ = false;
  bool seen_metadata_ = false;
  std::uint64_t offsets_count_ = 0;
};

// What the reference (safetensors 0.8: serde_json::from_str over the header's UTF-8) accepts
// around the JSON object: JSON whitespace (space, tab, line feed, carriage return) before and
// after it, as writers pad the header to 8 bytes with spaces; nothing else. So a byte-order mark
// or anything but whitespace before the object is refused here, and a NUL anywhere too (nlohmann
// would stop at it as at the end of the input, so '{...}\0garbage' would pass); what follows the
// object is refused by the SAX parser's strict mode.
void check_header_text(std::string_view text, const std::string& path) {
  const std::size_t start = std::min(text.find_first_not_of(" \t\n\r"), text.size());
  const std::string_view body = text.substr(start);
  if (body.empty() || body.front() != '{') {
    std::string found = "nothing";
    if (body.starts_with("\xEF\xBB\xBF")) {
      found = "a UTF-8 byte-order mark before it";
    } else if (!body.empty()) {
      switch (body.front()) {
        case '[':
          found = "array";
          break;
        case '"':
          found = "string";
          break;
        case 't':
        case 'f':
          found = "boolean";
          break;
        case 'n':
          found = "null";
          break;
        default:
          found = body.front() == '-' || (body.front() >= '0' && body.front() <= '9')
                      ? "number"
                      : detail::quoted(body.substr(0, 8), 8);
      }
    }
    throw Error(path, "header", "must be a JSON object, found " + found);
  }
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw Error(path, "byte " + std::to_string(8 + nul),
                "header holds a NUL byte; only JSON whitespace may surround its object");
}

// nlohmann would keep the last of two equal keys; a header with duplicates is ambiguous, so it
// is refused. Sorted, so that a million names cost n log n.
void refuse_duplicate_names(const std::vector<TensorEntry>& entries, const std::string& path) {
  std::vector<std::string_view> names;
  names.reserve(entries.size());
  for (const auto& entry : entries) names.push_back(entry.name);
  std::sort(names.begin(), names.end());
  const auto twice = std::adjacent_find(names.begin(), names.end());
  if (twice != names.end())
    throw Error(path, "header", "key " + detail::quoted(*twice) + " appears twice");
}

Value metadata_value(std::vector<std::pair<std::string, std::string>> items,
                     const std::string& path) {
  auto dict = std::make_shared<Dict>();
  dict->items.reserve(items.size());
  for (auto& [key, text] : items) dict->items.emplace_back(std::move(key), Value(std::move(text)));
  // Keys twice in __metadata__ are as ambiguous as tensor names twice.
  std::vector<std::string_view> keys;
  keys.reserve(dict->items.size());
  for (const auto& [key, value] : dict->items) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  const auto twice = std::adjacent_find(keys.begin(), keys.end());
  if (twice != keys.end())
    throw Error(path, "header __metadata__", "key " + detail::quoted(*twice) + " appears twice");
  return Value(std::move(dict));
}

// Byte length must equal shape × dtype size, computed without overflow.
void check_size(const TensorEntry& entry, const std::string& path) {
  std::optional<std::uint64_t> bytes = dtype_size(entry.dtype);
  for (auto extent : entry.shape) {
    if (bytes) bytes = detail::checked_mul(*bytes, static_cast<std::uint64_t>(extent));
  }
  const std::string where = tensor_location(entry.name);
  if (!bytes)
    throw Error(path, where, "shape " + shape_text(entry.shape) + " overflows 64 bits in bytes");
  const std::uint64_t held = entry.end - entry.begin;
  if (*bytes != held)
    throw Error(path, where,
                "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) +
                    ") hold " + std::to_string(held) + " bytes but shape " +
                    shape_text(entry.shape) + " of " + std::string(dtype_name(entry.dtype)) +
                    " needs " + std::to_string(*bytes));
}

// The tensors, sorted by offset, must tile the data region exactly: no holes (hidden payloads),
// no overlap (one byte read as two tensors), nothing after the last tensor (polyglot files).
void check_layout(std::vector<const TensorEntry*> entries, std::uint64_t data_size,
                  std::uint64_t data_start, const std::string& path) {
  for (const auto* entry : entries) {
    if (entry->end > data_size)
      throw Error(path, tensor_location(entry->name),
                  "data_offsets [" + std::to_string(entry->begin) + ", " +
                      std::to_string(entry->end) + ") reach past the end of the data region (" +
                      std::to_string(data_size) + " bytes after the header)");
  }
  std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t covered = 0;
  const TensorEntry* previous = nullptr;
  for (const auto* entry : entries) {
    if (entry->begin > covered)
      throw Error(path, tensor_location(entry->name),
                  "starts at data offset " + std::to_string(entry->begin) + " but the " +
                      (previous ? "previous " + tensor_location(previous->name) + " ends at "
                                : std::string("data region starts at ")) +
                      std::to_string(covered) + ": a hole of " +
                      std::to_string(entry->begin - covered) + " bytes");
    if (entry->begin < covered)
      throw Error(path, tensor_location(entry->name),
                  "data_offsets [" + std::to_string(entry->begin) + ", " +
                      std::to_string(entry->end) + ") overlap " + tensor_location(previous->name) +
                      ", which ends at " + std::to_string(covered));
    covered = entry->end;
    previous = entry;
  }
  if (covered != data_size)
    throw Error(path, "byte " + std::to_string(data_start + covered),
                std::to_string(data_size - covered) +
                    " bytes follow the last tensor; the data must end exactly at the end of the "
                    "file");
}

Tensor make_tensor(const TensorEntry& entry, const detail::MappedFile& file,
                   const std::shared_ptr<const detail::MappedFile>& owner,
                   std::uint64_t data_start) {
  Tensor tensor;
  tensor.dtype = entry.dtype;
  tensor.shape = entry.shape;
  tensor.strides.resize(entry.shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = entry.shape.size(); i-- > 0;) {
    tensor.strides[i] = stride;
    stride *= std::max<std::int64_t>(entry.shape[i], 1);
  }
  // One storage per tensor: safetensors does not align tensors to their element size, so a
  // shared storage with element offsets could not address them.
  auto storage = std::make_shared<Storage>();
  storage->bytes = file.bytes().subspan(data_start + entry.begin, entry.end - entry.begin);
  storage->owner = owner;
  tensor.storage = std::move(storage);
  return tensor;
}

}  // namespace

Value read_safetensors(const std::string& path, const ReadOptions&) {
  auto file = detail::MappedFile::open(path);
  detail::ByteReader reader(file->bytes(), path);
  if (file->size() < 8)
    throw Error(path, "byte 0",
                "file is " + std::to_string(file->size()) +
                    " bytes, too short for the 8-byte header length");
  const auto header_size = reader.read_le<std::uint64_t>("header length");
  if (header_size > kMaxHeaderBytes)
    throw Error(path, "byte 0",
                "header length " + std::to_string(header_size) + " exceeds the " +
                    std::to_string(kMaxHeaderBytes) + "-byte cap");
  if (header_size > reader.remaining())
    throw Error(path, "byte 0",
                "header length " + std::to_string(header_size) +
                    " runs past the end of the file (" + std::to_string(file->size()) + " bytes)");
  const std::string_view header_text = reader.read_string(header_size, "header");
  const std::uint64_t data_start = reader.position();
  const std::uint64_t data_size = reader.remaining();

  check_header_text(header_text, path);
  HeaderParser parser(path);
  Json::sax_parse(header_text.begin(), header_text.end(), &parser);
  std::vector<TensorEntry>& entries = parser.entries;
  refuse_duplicate_names(entries, path);
  for (const auto& entry : entries) check_size(entry, path);
  const bool has_metadata = parser.metadata.has_value();
  Value metadata;
  if (has_metadata) metadata = metadata_value(std::move(*parser.metadata), path);
  std::vector<const TensorEntry*> by_offset;
  by_offset.reserve(entries.size());
  for (const auto& entry : entries) by_offset.push_back(&entry);
  check_layout(std::move(by_offset), data_size, data_start, path);

  auto dict = std::make_shared<Dict>();
  dict->items.reserve(entries.size() + (has_metadata ? 1 : 0));
  if (has_metadata) dict->items.emplace_back(std::string(kMetadataKey), std::move(metadata));
  for (const auto& entry : entries)
    dict->items.emplace_back(
        entry.name, Value(std::make_shared<Tensor>(make_tensor(entry, *file, file, data_start))));
  return Value(std::move(dict));
}

}  // namespace gpucache
