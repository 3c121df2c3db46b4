#include "pt/pickle_convert.hpp"

#include <unordered_map>

#include "gpucache/common/checked_math.hpp"
#include "pt/pickle_text.hpp"

namespace gpucache::detail::pickle {
namespace {

constexpr std::size_t kMaxKeyDepth = 8;

std::string key_text_at(const PyValue& key, Context& context, std::size_t depth, bool quote) {
  if (const auto* text = std::get_if<Str>(&key)) {
    if (!quote) return std::string(text->text);
    std::string quoted;
    quoted.reserve(text->text.size() + 2);
    quoted.append(1, '\'').append(text->text).append(1, '\'');
    return quoted;
  }
  if (const auto* number = std::get_if<std::int64_t>(&key)) return std::to_string(*number);
  if (const auto* big = std::get_if<BigInt>(&key))
    return signed_le_decimal(*context.texts[big->text]);
  if (const auto* flag = std::get_if<bool>(&key)) return *flag ? "True" : "False";
  if (std::holds_alternative<PyNone>(key)) return "None";
  if (const auto* number = std::get_if<double>(&key)) return python_float_repr(*number);
  const auto* list = std::get_if<PyList*>(&key);
  if (list && (*list)->is_tuple && depth < kMaxKeyDepth) {
    std::string text = "(";
    const auto& items = (*list)->items;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) text += ", ";
      text += key_text_at(items[i], context, depth + 1, true);
    }
    return text + (items.size() == 1 ? ",)" : ")");
  }
  context.fail("dict keys of type " + std::string(kind_name(key)) + " are not supported");
}

class Converter {
 public:
  explicit Converter(Context& context) : context_(context) {}

  Value convert(const PyValue& value, std::uint64_t depth) {
    if (depth > context_.options.limits.max_depth + 1)
      context_.fail("objects nest deeper than " +
                    std::to_string(context_.options.limits.max_depth));
    return std::visit([&](const auto& item) { return convert_item(item, depth); }, value);
  }

  // Nodes a walk over the result would visit, counting shared subtrees each time they appear.
  std::uint64_t last_count = 0;

 private:
  Value convert_item(const PyNone&, std::uint64_t) { return counted(Value(None{}), 1); }
  Value convert_item(bool flag, std::uint64_t) { return counted(Value(flag), 1); }
  Value convert_item(std::int64_t number, std::uint64_t) { return counted(Value(number), 1); }
  Value convert_item(double number, std::uint64_t) { return counted(Value(number), 1); }
  Value convert_item(const BigInt& big, std::uint64_t) {
    return counted(Value(signed_le_decimal(*context_.texts[big.text])), 1);
  }
  Value convert_item(const Str& text, std::uint64_t) {
    charge_text(text.text.size());
    return counted(Value(std::string(text.text)), 1);
  }
  Value convert_item(const Bytes& bytes, std::uint64_t) {
    const Text& data = context_.texts[bytes.text];
    auto tensor = std::make_shared<Tensor>();
    tensor->dtype = DType::u8;
    tensor->shape = {static_cast<std::int64_t>(data->size())};
    tensor->strides = {1};
    auto storage = std::make_shared<Storage>();
    storage->bytes = std::as_bytes(std::span(data->data(), data->size()));
    storage->owner = data;
    tensor->storage = std::move(storage);
    return counted(Value(std::move(tensor)), 1);
  }
  Value convert_item(const GlobalRef& global, std::uint64_t) {
    if (global.entry->kind == GlobalKind::torch_dtype)
      return counted(Value("torch." + std::string(global.entry->name)), 1);
    context_.fail("a reference to '" + global_name(*global.entry) +
                  "' cannot be stored as a value");
  }
  Value convert_item(const StorageHandle& handle, std::uint64_t) {
    auto& made = storage_tensors_[handle.index];
    if (!made) {
      const StorageRef& storage = context_.result.storages[handle.index];
      made = std::make_shared<Tensor>();
      made->dtype = storage.dtype;
      made->shape = {static_cast<std::int64_t>(storage.numel)};
      made->strides = {1};
      made->storage = storage.storage;
      context_.result.storage_tensors.push_back(made);
    }
    return counted(Value(made), 1);
  }
  Value convert_item(const TensorHandle& tensor, std::uint64_t) {
    return counted(Value(context_.tensors[tensor.index]), 1);
  }
  Value convert_item(const NumpyDTypeObject* dtype, std::uint64_t) {
    return counted(Value("numpy.dtype('" + std::string(dtype->big_endian ? ">" : "<") +
                         std::string(dtype->code) + "')"),
                   1);
  }
  Value convert_item(const NdArrayObject* array, std::uint64_t) {
    if (!array->tensor) context_.fail("numpy array was never given its state (BUILD)");
    return counted(Value(context_.tensors[array->tensor->index]), 1);
  }

  Value convert_item(const PyList* list, std::uint64_t depth) {
    const bool shared = list->placements > 1;
    if (auto done = shared ? shared_.find(list) : shared_.end(); done != shared_.end())
      return reuse(done->second);
    auto out = std::make_shared<List>();
    out->is_tuple = list->is_tuple;
    out->items.reserve(list->items.size());
    std::uint64_t count = 1;
    for (const auto& item : list->items) {
      out->items.push_back(convert(item, depth + 1));
      count = add_count(count, last_count);
    }
    return shared ? remember(list, Value(std::move(out)), count)
                  : counted(Value(std::move(out)), count);
  }

  Value convert_item(const PyDict* dict, std::uint64_t depth) {
    const bool shared = dict->placements > 1;
    if (auto done = shared ? shared_.find(dict) : shared_.end(); done != shared_.end())
      return reuse(done->second);
    auto out = std::make_shared<Dict>();
    out->items.reserve(dict->items.size());
    std::uint64_t count = 1;
    for (const auto& [key, item] : dict->items) {
      charge_text(key.size());
      out->items.emplace_back(std::string(key), convert(item, depth + 1));
      count = add_count(count, last_count);
    }
    return shared ? remember(dict, Value(std::move(out)), count)
                  : counted(Value(std::move(out)), count);
  }

  struct Done {
    Value value;
    std::uint64_t count;
  };

  Value counted(Value value, std::uint64_t count) {
    last_count = count;
    return value;
  }
  // A shared subtree (placed in containers more than once) is converted once and kept here; any
  // walk of the result visits it again, so its parent counts it again.
  Value reuse(const Done& done) {
    last_count = done.count;
    return done.value;
  }
  Value remember(const void* key, Value value, std::uint64_t count) {
    shared_.emplace(key, Done{value, count});
    last_count = count;
    return value;
  }
  std::uint64_t add_count(std::uint64_t a, std::uint64_t b) {
    const auto sum = checked_add(a, b);
    if (!sum || *sum > context_.options.limits.max_values)
      context_.fail("the object tree expands to more than " +
                    std::to_string(context_.options.limits.max_values) + " values");
    return *sum;
  }
  void charge_text(std::uint64_t bytes) {
    const auto sum = checked_add(text_bytes_, bytes);
    if (!sum || *sum > context_.options.limits.max_text_bytes)
      context_.fail("the object tree holds more than " +
                    std::to_string(context_.options.limits.max_text_bytes) + " bytes of text");
    text_bytes_ = *sum;
  }

  Context& context_;
  std::unordered_map<const void*, Done> shared_;
  std::unordered_map<std::size_t, std::shared_ptr<Tensor>> storage_tensors_;
  std::uint64_t text_bytes_ = 0;
};

}  // namespace

std::string key_text(const PyValue& key, Context& context) {
  return key_text_at(key, context, 0, false);
}

Value to_value(const PyValue& root, Context& context) {
  Converter converter(context);
  return converter.convert(root, 0);
}

}  // namespace gpucache::detail::pickle
