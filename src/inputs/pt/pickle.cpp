#include "pt/pickle.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <memory_resource>
#include <optional>
#include <unordered_map>

#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/error_text.hpp"
#include "pt/pickle_convert.hpp"
#include "pt/pickle_globals.hpp"
#include "pt/pickle_object.hpp"
#include "pt/pickle_text.hpp"

namespace gpucache::detail {
namespace {

using namespace pickle;

constexpr std::size_t kMaxGlobalLine = 256;

// Opcodes CPython knows that this machine refuses, named for the error message.
std::string_view refused_opcode_name(std::uint8_t op) noexcept {
  switch (op) {
    case '2':
      return "DUP";
    case 'F':
      return "FLOAT";
    case 'I':
      return "INT";
    case 'L':
      return "LONG";
    case 'P':
      return "PERSID";
    case 'S':
      return "STRING";
    case 'V':
      return "UNICODE";
    case 'g':
      return "GET";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 'p':
      return "PUT";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 0x8f:
      return "EMPTY_SET";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 0x92:
      return "NEWOBJ_EX";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    default:
      return {};
  }
}

std::string hex_byte(std::uint8_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  return std::string("0x") + kDigits[value >> 4] + kDigits[value & 15];
}

// The arena lists, tuples and dicts come from. It frees nothing before the machine ends, so it
// counts what it hands out and refuses to go beyond the limit (a pickle that makes and drops
// objects in a loop would otherwise grow it without bound).
class ObjectArena final : public std::pmr::memory_resource {
 public:
  ObjectArena(std::uint64_t cap, const Context& context) : cap_(cap), context_(context) {}

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    used_ += bytes;
    if (used_ > cap_)
      context_.fail("lists, tuples and dicts take more than " + std::to_string(cap_) +
                    " bytes (PickleLimits::object_bytes_base and object_bytes_per_pickle_byte)");
    return arena_.allocate(bytes, alignment);
  }
  void do_deallocate(void*, std::size_t, std::size_t) override {}
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::pmr::monotonic_buffer_resource arena_{std::size_t{1} << 20};
  std::uint64_t used_ = 0;
  std::uint64_t cap_;
  const Context& context_;
};

std::uint64_t object_bytes_cap(const PickleLimits& limits, std::uint64_t pickle_bytes) {
  const auto scaled = checked_mul(pickle_bytes, limits.object_bytes_per_pickle_byte);
  const auto cap = scaled ? checked_add(*scaled, limits.object_bytes_base) : std::nullopt;
  return cap ? *cap : std::numeric_limits<std::uint64_t>::max();
}

class Machine {
 public:
  Machine(std::span<const std::byte> bytes, const PickleOptions& options, PickleResult& result)
      : context_{options, result, &arena_, {}, {}, {}, {}, 0},
        arena_(object_bytes_cap(options.limits, bytes.size()), context_),
        bytes_(bytes),
        limits_(options.limits),
        max_depth_(std::min<std::uint64_t>(options.limits.max_depth, UINT32_MAX - 1)) {
    // Pickles put nearly every object they make in the memo, one for every few bytes: reserving
    // address space up front spares the copies of a growing vector (untouched pages cost nothing).
    memo_.reserve(std::min<std::uint64_t>(bytes.size() / 8, limits_.max_memo));
  }

  void run() {
    for (;;) {
      if (pos_ >= bytes_.size()) {
        context_.opcode_offset = pos_;
        fail("pickle ends without a STOP opcode");
      }
      context_.opcode_offset = pos_;
      const auto op = std::to_integer<std::uint8_t>(bytes_[pos_++]);
      if (step(op)) return;
    }
  }

 private:
  [[noreturn]] void fail(const std::string& cause) const { context_.fail(cause); }

  // ---- reading the opcode stream -------------------------------------------------------------
  std::span<const std::byte> take(std::uint64_t length, const char* what) {
    if (length > bytes_.size() - pos_) [[unlikely]]
      fail_short(length, what);
    auto span = bytes_.subspan(pos_, length);
    pos_ += length;
    return span;
  }
  [[noreturn, gnu::cold, gnu::noinline]] void fail_short(std::uint64_t length,
                                                         const char* what) const {
    fail(std::string(what) + " needs " + std::to_string(length) + " bytes but only " +
         std::to_string(bytes_.size() - pos_) + " remain");
  }
  template <typename T>
  T read_le(const char* what) {
    const auto span = take(sizeof(T), what);
    std::make_unsigned_t<T> value = 0;
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(&value, span.data(), sizeof(T));
    } else {
      for (std::size_t i = sizeof(T); i-- > 0;)
        value = static_cast<std::make_unsigned_t<T>>((value << 8) |
                                                     std::to_integer<std::uint8_t>(span[i]));
    }
    return static_cast<T>(value);
  }
  std::string_view read_text(std::uint64_t length, const char* what) {
    auto span = take(length, what);
    return {reinterpret_cast<const char*>(span.data()), span.size()};
  }
  std::string_view read_line(const char* what) {
    const std::uint64_t limit = std::min<std::uint64_t>(bytes_.size() - pos_, kMaxGlobalLine + 1);
    for (std::uint64_t i = 0; i < limit; ++i) {
      if (bytes_[pos_ + i] == std::byte{'\n'}) {
        auto line = read_text(i, what);
        ++pos_;
        return line;
      }
    }
    fail(std::string(what) + " is not a line of at most " + std::to_string(kMaxGlobalLine) +
         " bytes");
  }

  // ---- the stack -----------------------------------------------------------------------------
  std::size_t floor() const noexcept { return marks_.empty() ? 0 : marks_.back(); }

  void push(PyValue value, bool created = true) {
    if (stack_.size() >= limits_.max_stack) [[unlikely]]
      fail_limit("stack holds more than ", limits_.max_stack, " objects");
    if (created && ++objects_ > limits_.max_objects) [[unlikely]]
      fail_limit("pickle creates more than ", limits_.max_objects, " objects");
    stack_.push_back(value);
  }
  [[noreturn, gnu::cold, gnu::noinline]] void fail_limit(const char* before, std::uint64_t limit,
                                                         const char* after) const {
    fail(before + std::to_string(limit) + after);
  }
  PyValue pop() {
    if (stack_.size() <= floor()) fail("stack underflow");
    PyValue value = std::move(stack_.back());
    stack_.pop_back();
    return value;
  }
  PyValue& top() {
    if (stack_.size() <= floor()) fail("stack underflow");
    return stack_.back();
  }
  // The objects above the last MARK, moved into a buffer every call reuses: valid until the next.
  std::vector<PyValue>& pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    marked_.clear();
    marked_.insert(marked_.end(),
                   std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(mark)),
                   std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return marked_;
  }

  // ---- containers ----------------------------------------------------------------------------
  // Marks a value as nested inside another container and returns its depth.
  static std::uint32_t freeze(const PyValue& value) {
    Mutable* object = nullptr;
    if (auto* list = std::get_if<PyList*>(&value))
      object = *list;
    else if (auto* dict = std::get_if<PyDict*>(&value))
      object = *dict;
    else if (auto* dtype = std::get_if<NumpyDTypeObject*>(&value))
      object = *dtype;
    else if (auto* array = std::get_if<NdArrayObject*>(&value))
      object = *array;
    if (!object) return 0;
    object->frozen = true;
    if (object->placements < 2) ++object->placements;
    return object->depth;
  }
  void deepen(Mutable& container, std::uint32_t child_depth) {
    const std::uint64_t depth =
        std::max<std::uint64_t>(container.depth, child_depth + std::uint64_t{1});
    if (depth > max_depth_) fail("objects nest deeper than " + std::to_string(max_depth_));
    container.depth = static_cast<std::uint32_t>(depth);
  }
  void check_mutable(const Mutable& container, const char* what) {
    if (container.frozen)
      fail(std::string(what) +
           " modifies a container already nested in another (recursive objects are not supported)");
  }

  PyList& target_list(const char* op) {
    auto* list = std::get_if<PyList*>(&top());
    if (!list || (*list)->is_tuple)
      fail(std::string(op) + " needs a list, not " + std::string(kind_name(top())));
    return **list;
  }
  PyDict& target_dict(const char* op) {
    auto* dict = std::get_if<PyDict*>(&top());
    if (!dict) fail(std::string(op) + " needs a dict, not " + std::string(kind_name(top())));
    return **dict;
  }

  void append_to(PyList& list, PyValue item, const char* op) {
    const auto depth = freeze(item);
    check_mutable(list, op);
    deepen(list, depth);
    list.items.push_back(item);
  }
  void set_item(PyDict& dict, const PyValue& key, PyValue value, const char* op) {
    // str keys (nearly all) are used as they lie in the pickle; others become their repr, kept in
    // the arena with the dict.
    std::string_view text;
    if (const auto* str = std::get_if<Str>(&key)) {
      text = str->text;
    } else {
      const std::string repr = key_text(key, context_);
      auto* copy = static_cast<char*>(arena_.allocate(std::max<std::size_t>(repr.size(), 1), 1));
      text = {copy, repr.size()};
      std::copy(repr.begin(), repr.end(), copy);
    }
    const auto depth = freeze(value);
    check_mutable(dict, op);
    deepen(dict, depth);
    if (dict_has_key(dict, text))
      fail("dict key " + quoted(text, kShownChars, '\'') + " appears twice");
    if (dict.items.empty()) dict.items.reserve(4);  // rows of dialogue files have four keys
    dict.items.emplace_back(text, value);
  }
  // Small dicts (a dataset row's few keys) are searched in place; a hash index is built only for
  // big ones, so millions of rows cost no per-key index nodes.
  bool dict_has_key(PyDict& dict, std::string_view key) {
    constexpr std::size_t kLinearSearchItems = 32;
    if (dict.items.size() < kLinearSearchItems)
      return std::any_of(dict.items.begin(), dict.items.end(),
                         [&](const auto& item) { return item.first == key; });
    if (!dict.index) {
      dict.index = make_object<DictIndex>(&arena_);
      for (std::size_t i = 0; i < dict.items.size(); ++i)
        dict.index->emplace(dict.items[i].first, i);
    }
    return !dict.index->emplace(key, dict.items.size()).second;
  }
  // A tuple of `items`. Tuples cannot change, so the empty one is made once, as in CPython.
  PyList* make_tuple(std::span<const PyValue> items) {
    if (items.empty() && empty_tuple_) {
      empty_tuple_->placements = 2;  // placed in many containers: converted once and shared
      return empty_tuple_;
    }
    auto* tuple = make_object<PyList>(&arena_);
    tuple->is_tuple = true;
    tuple->items.reserve(items.size());
    for (const auto& item : items) {
      deepen(*tuple, freeze(item));
      tuple->items.push_back(item);
    }
    if (items.empty()) empty_tuple_ = tuple;
    return tuple;
  }

  // ---- values --------------------------------------------------------------------------------
  void push_long(std::span<const std::byte> le) {
    if (le.empty()) return push(std::int64_t{0});
    const bool negative = std::to_integer<std::uint8_t>(le.back()) & 0x80;
    const auto fill = negative ? std::byte{0xff} : std::byte{0};
    std::size_t significant = le.size();
    // Drops redundant sign bytes so wide encodings of small numbers still fit in 64 bits.
    while (significant > 8 && le[significant - 1] == fill) --significant;
    const bool sign_kept =
        significant == le.size() ||
        ((std::to_integer<std::uint8_t>(le[significant - 1]) & 0x80) != 0) == negative;
    if (significant <= 8 && sign_kept) {
      std::uint64_t value = negative ? ~std::uint64_t{0} : 0;
      for (std::size_t i = 0; i < significant; ++i) {
        value &= ~(std::uint64_t{0xff} << (8 * i));
        value |= std::to_integer<std::uint64_t>(le[i]) << (8 * i);
      }
      return push(static_cast<std::int64_t>(value));
    }
    push(BigInt{keep_text(std::string_view(reinterpret_cast<const char*>(le.data()), le.size()))});
  }
  std::size_t keep_text(std::string_view text) {
    context_.texts.push_back(std::make_shared<const std::string>(text));
    return context_.texts.size() - 1;
  }
  void push_str(std::string_view text) {
    if (!is_valid_utf8(text)) fail("string is not valid UTF-8");
    push(Str{text});
  }
  void push_bytes(std::string_view data) { push(Bytes{keep_text(data)}); }

  void push_global(std::string_view module, std::string_view name) {
    const auto* entry = find_allowed_global(module, name);
    if (!entry) {
      std::string full(module);
      full += '.';
      full += name;
      fail("refusing global " + quoted(full, 2 * kShownChars, '\''));
    }
    push(GlobalRef{entry});
  }

  // CPython and torch number memo entries 0, 1, 2, ... so a vector holds them, densely: an index
  // beyond its end goes to a map instead, so a huge index cannot make the vector grow.
  PyValue* memo_slot(std::uint64_t index) {
    if (index < memo_.size()) return &memo_[index];
    if (sparse_memo_.empty()) return nullptr;
    auto found = sparse_memo_.find(index);
    return found == sparse_memo_.end() ? nullptr : &found->second;
  }
  void memo_put(std::uint64_t index) {
    const PyValue& value = top();
    if (PyValue* slot = memo_slot(index)) {
      *slot = value;
      return;
    }
    if (memo_count_ >= limits_.max_memo) [[unlikely]]
      fail("memo holds more than " + std::to_string(limits_.max_memo) + " objects");
    ++memo_count_;
    if (index == memo_.size())  // the next index: what picklers write
      memo_.push_back(value);
    else
      sparse_memo_.emplace(index, value);
  }
  void memo_get(std::uint64_t index) {
    const PyValue* slot = memo_slot(index);
    if (!slot) fail("memo index " + std::to_string(index) + " is not defined");
    push(*slot, false);
  }

  void call(PyValue args_value, const PyValue& callable_value, const char* op, PyValue& out) {
    const auto* callable = std::get_if<GlobalRef>(&callable_value);
    if (!callable)
      fail(std::string(op) + " needs a global to call, not " +
           std::string(kind_name(callable_value)));
    auto* args = std::get_if<PyList*>(&args_value);
    if (!args || !(*args)->is_tuple)
      fail(std::string(op) + " arguments must be a tuple, not " +
           std::string(kind_name(args_value)));
    out = call_global(*callable->entry, (*args)->items, context_);
  }

  // ---- one opcode; true at STOP --------------------------------------------------------------
  bool step(std::uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const auto version = read_le<std::uint8_t>("PROTO version");
        if (version > 5) fail("unsupported pickle protocol " + std::to_string(version));
        return false;
      }
      case 0x95: {  // FRAME: a length prefix for buffered readers; the bytes are read as usual
        const auto length = read_le<std::uint64_t>("FRAME length");
        if (length > bytes_.size() - pos_)
          fail("FRAME of " + std::to_string(length) + " bytes runs past the end");
        return false;
      }
      case '.':  // STOP
        finish();
        return true;
      case '(':  // MARK
        if (marks_.size() >= limits_.max_stack) fail("too many open MARKs");
        marks_.push_back(stack_.size());
        return false;
      case '0':  // POP
        if (stack_.size() > floor())
          stack_.pop_back();
        else
          pop_mark();
        return false;
      case '1':  // POP_MARK
        pop_mark();
        return false;

      case 'N':
        push(PyNone{});
        return false;
      case 0x88:  // NEWTRUE
        push(true);
        return false;
      case 0x89:  // NEWFALSE
        push(false);
        return false;
      case 'J':
        push(std::int64_t{read_le<std::int32_t>("BININT")});
        return false;
      case 'K':
        push(std::int64_t{read_le<std::uint8_t>("BININT1")});
        return false;
      case 'M':
        push(std::int64_t{read_le<std::uint16_t>("BININT2")});
        return false;
      case 0x8a:
        push_long(take(read_le<std::uint8_t>("LONG1 length"), "LONG1"));
        return false;
      case 0x8b: {  // LONG4
        const auto length = read_le<std::int32_t>("LONG4 length");
        if (length < 0 || static_cast<std::uint64_t>(length) > limits_.max_long_bytes)
          fail("LONG4 of " + std::to_string(length) + " bytes is out of range");
        push_long(take(static_cast<std::uint64_t>(length), "LONG4"));
        return false;
      }
      case 'G': {  // BINFLOAT, big-endian
        std::uint64_t raw = 0;
        for (auto byte : take(8, "BINFLOAT"))
          raw = (raw << 8) | std::to_integer<std::uint64_t>(byte);
        push(std::bit_cast<double>(raw));
        return false;
      }
      case 'X':
        push_str(read_text(read_le<std::uint32_t>("BINUNICODE length"), "BINUNICODE"));
        return false;
      case 0x8c:
        push_str(read_text(read_le<std::uint8_t>("SHORT_BINUNICODE length"), "SHORT_BINUNICODE"));
        return false;
      case 0x8d:
        push_str(read_text(read_le<std::uint64_t>("BINUNICODE8 length"), "BINUNICODE8"));
        return false;
      // Python 2 strings; torch.load decodes them as UTF-8.
      case 'U':
        push_str(read_text(read_le<std::uint8_t>("SHORT_BINSTRING length"), "SHORT_BINSTRING"));
        return false;
      case 'T': {  // BINSTRING
        const auto length = read_le<std::int32_t>("BINSTRING length");
        if (length < 0) fail("BINSTRING length is negative");
        push_str(read_text(static_cast<std::uint64_t>(length), "BINSTRING"));
        return false;
      }
      case 'B':
        push_bytes(read_text(read_le<std::uint32_t>("BINBYTES length"), "BINBYTES"));
        return false;
      case 'C':
        push_bytes(read_text(read_le<std::uint8_t>("SHORT_BINBYTES length"), "SHORT_BINBYTES"));
        return false;
      case 0x8e:
        push_bytes(read_text(read_le<std::uint64_t>("BINBYTES8 length"), "BINBYTES8"));
        return false;
      case 0x96:
        push_bytes(read_text(read_le<std::uint64_t>("BYTEARRAY8 length"), "BYTEARRAY8"));
        return false;

      case '}':  // EMPTY_DICT
        push(make_object<PyDict>(&arena_));
        return false;
      case ']':  // EMPTY_LIST
        push(make_object<PyList>(&arena_));
        return false;
      case ')':  // EMPTY_TUPLE
        push(make_tuple({}));
        return false;
      case 't':  // TUPLE
        push(make_tuple(pop_mark()));
        return false;
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
        const std::size_t count = op - 0x84u;
        if (stack_.size() < floor() + count) fail("stack underflow");
        auto tuple = make_tuple(std::span(stack_).last(count));
        stack_.resize(stack_.size() - count);
        push(std::move(tuple));
        return false;
      }
      case 'l': {  // LIST
        auto& items = pop_mark();
        auto list = make_object<PyList>(&arena_);
        for (auto& item : items) append_to(*list, std::move(item), "LIST");
        push(std::move(list));
        return false;
      }
      case 'd': {  // DICT
        auto& items = pop_mark();
        if (items.size() % 2 != 0) fail("DICT needs key/value pairs");
        auto dict = make_object<PyDict>(&arena_);
        for (std::size_t i = 0; i < items.size(); i += 2)
          set_item(*dict, items[i], std::move(items[i + 1]), "DICT");
        push(std::move(dict));
        return false;
      }
      case 'a': {  // APPEND
        PyValue item = pop();
        append_to(target_list("APPEND"), std::move(item), "APPEND");
        return false;
      }
      case 'e': {  // APPENDS
        auto& items = pop_mark();
        PyList& list = target_list("APPENDS");
        for (auto& item : items) append_to(list, std::move(item), "APPENDS");
        return false;
      }
      case 's': {  // SETITEM
        PyValue value = pop();
        PyValue key = pop();
        set_item(target_dict("SETITEM"), key, std::move(value), "SETITEM");
        return false;
      }
      case 'u': {  // SETITEMS
        auto& items = pop_mark();
        if (items.size() % 2 != 0) fail("SETITEMS needs key/value pairs");
        PyDict& dict = target_dict("SETITEMS");
        for (std::size_t i = 0; i < items.size(); i += 2)
          set_item(dict, items[i], std::move(items[i + 1]), "SETITEMS");
        return false;
      }

      case 'q':
        memo_put(read_le<std::uint8_t>("BINPUT index"));
        return false;
      case 'r':
        memo_put(read_le<std::uint32_t>("LONG_BINPUT index"));
        return false;
      case 0x94:  // MEMOIZE: the next index, len(memo) in CPython
        memo_put(memo_count_);
        return false;
      case 'h':
        memo_get(read_le<std::uint8_t>("BINGET index"));
        return false;
      case 'j':
        memo_get(read_le<std::uint32_t>("LONG_BINGET index"));
        return false;

      case 'c': {  // GLOBAL "module\nname\n"
        const auto module = read_line("GLOBAL module");
        const auto name = read_line("GLOBAL name");
        push_global(module, name);
        return false;
      }
      case 0x93: {  // STACK_GLOBAL
        PyValue name = pop();
        PyValue module = pop();
        const auto* module_text = std::get_if<Str>(&module);
        const auto* name_text = std::get_if<Str>(&name);
        if (!module_text || !name_text) fail("STACK_GLOBAL needs two strings");
        push_global(module_text->text, name_text->text);
        return false;
      }
      case 'R': {  // REDUCE: callable(*args) replaces the callable
        PyValue args = pop();
        PyValue& callable = top();
        PyValue result;
        call(std::move(args), callable, "REDUCE", result);
        callable = std::move(result);
        if (++objects_ > limits_.max_objects)
          fail("pickle creates more than " + std::to_string(limits_.max_objects) + " objects");
        return false;
      }
      case 0x81: {  // NEWOBJ: cls.__new__(cls, *args)
        PyValue args = pop();
        PyValue cls = pop();
        const auto* global = std::get_if<GlobalRef>(&cls);
        // As in torch.load(weights_only=True): OrderedDict and torch.Size pickle through REDUCE.
        if (!global || global->entry->kind != GlobalKind::parameter)
          fail("NEWOBJ is only supported for torch.nn.Parameter");
        PyValue result;
        call(std::move(args), cls, "NEWOBJ", result);
        push(std::move(result));
        return false;
      }
      case 'b': {  // BUILD
        PyValue state = pop();
        build(top(), state, context_);
        return false;
      }
      case 'Q': {  // BINPERSID
        PyValue pid = pop();
        push(persistent_load(pid, context_));
        return false;
      }
      default:
        break;
    }
    const auto name = refused_opcode_name(op);
    if (!name.empty()) fail("unsupported opcode " + std::string(name) + " (" + hex_byte(op) + ")");
    fail("unknown opcode " + hex_byte(op));
  }

  void finish() {
    if (!marks_.empty()) fail("STOP with an open MARK");
    if (stack_.size() != 1)
      fail("STOP with " + std::to_string(stack_.size()) + " objects on the stack, expected 1");
    context_.result.end = pos_;
    context_.result.value = to_value(stack_.back(), context_);
  }

  // Before the objects, so it outlives all of them (members are destroyed in reverse order).
  Context context_;
  ObjectArena arena_;
  std::span<const std::byte> bytes_;
  const PickleLimits& limits_;
  std::uint64_t max_depth_;  // limits_.max_depth, kept where Mutable::depth can count
  std::uint64_t pos_ = 0;
  std::uint64_t objects_ = 0;
  std::vector<PyValue> stack_;
  std::vector<PyValue> marked_;  // pop_mark's buffer
  std::vector<std::size_t> marks_;
  std::vector<PyValue> memo_;
  PyList* empty_tuple_ = nullptr;
  std::unordered_map<std::uint64_t, PyValue> sparse_memo_;
  std::uint64_t memo_count_ = 0;
};

}  // namespace

PickleResult unpickle(std::span<const std::byte> bytes, const PickleOptions& options) {
  PickleResult result;
  Machine(bytes, options, result).run();
  return result;
}

}  // namespace gpucache::detail
