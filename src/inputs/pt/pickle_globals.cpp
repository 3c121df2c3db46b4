#include "pt/pickle_globals.hpp"

#include <array>
#include <limits>
#include <optional>

#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/error_text.hpp"
#include "gpucache/error.hpp"
#include "npy/npy_header.hpp"
#include "pt/pickle_text.hpp"

namespace gpucache::detail::pickle {
namespace {

using K = GlobalKind;

// Modelled on torch/_weights_only_unpickler.py: only these names resolve, by table lookup.
constexpr std::array kAllowed = {
    AllowedGlobal{"collections", "OrderedDict", K::ordered_dict, DType::u8},
    AllowedGlobal{"collections", "Counter", K::counter, DType::u8},
    AllowedGlobal{"torch", "Size", K::torch_size, DType::u8},
    AllowedGlobal{"torch._utils", "_rebuild_tensor", K::rebuild_tensor, DType::u8},
    AllowedGlobal{"torch._utils", "_rebuild_tensor_v2", K::rebuild_tensor_v2, DType::u8},
    AllowedGlobal{"torch._utils", "_rebuild_tensor_v3", K::rebuild_tensor_v3, DType::u8},
    AllowedGlobal{"torch._utils", "_rebuild_parameter", K::rebuild_parameter, DType::u8},
    AllowedGlobal{"torch._utils", "_rebuild_parameter_with_state", K::rebuild_parameter_with_state,
                  DType::u8},
    AllowedGlobal{"torch.nn.parameter", "Parameter", K::parameter, DType::u8},
    AllowedGlobal{"torch", "DoubleStorage", K::storage_type, DType::f64},
    AllowedGlobal{"torch", "FloatStorage", K::storage_type, DType::f32},
    AllowedGlobal{"torch", "HalfStorage", K::storage_type, DType::f16},
    AllowedGlobal{"torch", "BFloat16Storage", K::storage_type, DType::bf16},
    AllowedGlobal{"torch", "LongStorage", K::storage_type, DType::i64},
    AllowedGlobal{"torch", "IntStorage", K::storage_type, DType::i32},
    AllowedGlobal{"torch", "ShortStorage", K::storage_type, DType::i16},
    AllowedGlobal{"torch", "CharStorage", K::storage_type, DType::i8},
    AllowedGlobal{"torch", "ByteStorage", K::storage_type, DType::u8},
    AllowedGlobal{"torch", "BoolStorage", K::storage_type, DType::boolean},
    AllowedGlobal{"torch.storage", "UntypedStorage", K::untyped_storage, DType::u8},
    AllowedGlobal{"torch", "UntypedStorage", K::untyped_storage, DType::u8},
    AllowedGlobal{"torch", "float64", K::torch_dtype, DType::f64},
    AllowedGlobal{"torch", "float32", K::torch_dtype, DType::f32},
    AllowedGlobal{"torch", "float16", K::torch_dtype, DType::f16},
    AllowedGlobal{"torch", "bfloat16", K::torch_dtype, DType::bf16},
    AllowedGlobal{"torch", "int64", K::torch_dtype, DType::i64},
    AllowedGlobal{"torch", "int32", K::torch_dtype, DType::i32},
    AllowedGlobal{"torch", "int16", K::torch_dtype, DType::i16},
    AllowedGlobal{"torch", "int8", K::torch_dtype, DType::i8},
    AllowedGlobal{"torch", "uint8", K::torch_dtype, DType::u8},
    AllowedGlobal{"torch", "bool", K::torch_dtype, DType::boolean},
    AllowedGlobal{"torch", "uint16", K::torch_dtype, DType::u16},
    AllowedGlobal{"torch", "uint32", K::torch_dtype, DType::u32},
    AllowedGlobal{"torch", "uint64", K::torch_dtype, DType::u64},
    AllowedGlobal{"torch", "float8_e4m3fn", K::torch_dtype, DType::fp8_e4m3},
    AllowedGlobal{"torch", "float8_e5m2", K::torch_dtype, DType::fp8_e5m2},
    AllowedGlobal{"_codecs", "encode", K::codecs_encode, DType::u8},
    AllowedGlobal{"numpy.core.multiarray", "_reconstruct", K::numpy_reconstruct, DType::u8},
    AllowedGlobal{"numpy._core.multiarray", "_reconstruct", K::numpy_reconstruct, DType::u8},
    AllowedGlobal{"numpy", "ndarray", K::numpy_ndarray, DType::u8},
    AllowedGlobal{"numpy", "dtype", K::numpy_dtype, DType::u8},
    AllowedGlobal{"numpy.core.multiarray", "scalar", K::numpy_scalar, DType::u8},
    AllowedGlobal{"numpy._core.multiarray", "scalar", K::numpy_scalar, DType::u8},
    AllowedGlobal{"numpy.core.numeric", "_frombuffer", K::numpy_frombuffer, DType::u8},
    AllowedGlobal{"numpy._core.numeric", "_frombuffer", K::numpy_frombuffer, DType::u8},
};

constexpr std::size_t kMaxRank = 64;

std::span<const PyValue> tuple_items(const PyValue& value, const char* what, Context& context) {
  const auto* list = std::get_if<PyList*>(&value);
  if (!list || !(*list)->is_tuple)
    context.fail(std::string(what) + " must be a tuple, not " + std::string(kind_name(value)));
  return (*list)->items;
}

std::int64_t int_arg(const PyValue& value, const char* what, Context& context) {
  if (const auto* number = std::get_if<std::int64_t>(&value)) return *number;
  context.fail(std::string(what) + " must be an int, not " + std::string(kind_name(value)));
}

bool bool_arg(const PyValue& value, const char* what, Context& context) {
  if (const auto* flag = std::get_if<bool>(&value)) return *flag;
  context.fail(std::string(what) + " must be a bool, not " + std::string(kind_name(value)));
}

std::string_view str_arg(const PyValue& value, const char* what, Context& context) {
  if (const auto* text = std::get_if<Str>(&value)) return text->text;
  context.fail(std::string(what) + " must be a str, not " + std::string(kind_name(value)));
}

std::vector<std::int64_t> dims_arg(const PyValue& value, const char* what, Context& context) {
  const auto& items = tuple_items(value, what, context);
  if (items.size() > kMaxRank) context.fail(std::string(what) + " has more than 64 dimensions");
  std::vector<std::int64_t> dims;
  dims.reserve(items.size());
  for (const auto& item : items) {
    const auto dim = int_arg(item, what, context);
    if (dim < 0) context.fail(std::string(what) + " has a negative entry");
    dims.push_back(dim);
  }
  return dims;
}

void expect_arity(std::span<const PyValue> args, std::size_t low, std::size_t high,
                  const AllowedGlobal& callable, Context& context) {
  if (args.size() < low || args.size() > high)
    context.fail(global_name(callable) + " takes " + std::to_string(low) +
                 (high != low ? " to " + std::to_string(high) : std::string()) +
                 " arguments, got " + std::to_string(args.size()));
}

TensorHandle tensor_arg(const PyValue& value, const char* what, Context& context) {
  if (const auto* tensor = std::get_if<TensorHandle>(&value)) return *tensor;
  context.fail(std::string(what) + " must be a tensor, not " + std::string(kind_name(value)));
}

// _rebuild_tensor(storage, offset, size, stride), _v2 adds (requires_grad, backward_hooks
// [, metadata]) and _v3 adds (requires_grad, backward_hooks, dtype[, metadata]).
PyValue rebuild_tensor(const AllowedGlobal& callable, std::span<const PyValue> args,
                       Context& context) {
  const bool v3 = callable.kind == K::rebuild_tensor_v3;
  if (callable.kind == K::rebuild_tensor)
    expect_arity(args, 4, 4, callable, context);
  else if (v3)
    expect_arity(args, 7, 8, callable, context);
  else
    expect_arity(args, 6, 7, callable, context);

  const auto* handle = std::get_if<StorageHandle>(&args[0]);
  if (!handle)
    context.fail("tensor storage must come from a persistent id, not " +
                 std::string(kind_name(args[0])));
  const StorageRef& storage = context.result.storages[handle->index];
  auto tensor = std::make_shared<Tensor>();
  tensor->dtype = storage.dtype;
  tensor->storage_offset = int_arg(args[1], "tensor storage offset", context);
  if (tensor->storage_offset < 0) context.fail("tensor storage offset is negative");
  tensor->shape = dims_arg(args[2], "tensor size", context);
  tensor->strides = dims_arg(args[3], "tensor stride", context);
  if (tensor->shape.size() != tensor->strides.size())
    context.fail("tensor size has " + std::to_string(tensor->shape.size()) +
                 " entries but stride " + std::to_string(tensor->strides.size()));
  if (args.size() > 4) {
    bool_arg(args[4], "requires_grad", context);
    if (!std::holds_alternative<PyDict*>(args[5]))
      context.fail("backward_hooks must be a dict, not " + std::string(kind_name(args[5])));
  }
  if (v3) {
    const auto* dtype = std::get_if<GlobalRef>(&args[6]);
    if (!dtype || dtype->entry->kind != K::torch_dtype)
      context.fail("tensor dtype must be a torch dtype, not " + std::string(kind_name(args[6])));
    tensor->dtype = dtype->entry->dtype;
  }
  // Metadata (conjugate and negative bits) changes what the bytes mean; torch only writes it
  // when set, so any present is refused rather than silently ignored.
  const std::size_t metadata_index = v3 ? 7 : 6;
  if (args.size() > metadata_index && !std::holds_alternative<PyNone>(args[metadata_index])) {
    const auto* dict = std::get_if<PyDict*>(&args[metadata_index]);
    if (!dict || !(*dict)->items.empty())
      context.fail("tensor metadata (conjugate or negative views) is not supported");
  }
  tensor->storage = storage.storage;
  context.result.storage_tensors.push_back(tensor);
  return context.keep(std::move(tensor));
}

PyValue codecs_encode(const AllowedGlobal& callable, std::span<const PyValue> args,
                      Context& context) {
  expect_arity(args, 2, 2, callable, context);
  const auto& text = str_arg(args[0], "_codecs.encode text", context);
  const auto& encoding = str_arg(args[1], "_codecs.encode encoding", context);
  if (encoding != "latin1" && encoding != "latin-1" && encoding != "iso-8859-1")
    context.fail("_codecs.encode with encoding " + quoted(encoding, kShownChars, '\'') +
                 " is not supported (only latin1)");
  auto bytes = utf8_to_latin1(text);
  if (!bytes) context.fail("_codecs.encode text has characters outside latin-1");
  context.texts.push_back(std::make_shared<const std::string>(std::move(*bytes)));
  return Bytes{context.texts.size() - 1};
}

PyValue numpy_dtype_object(const AllowedGlobal& callable, std::span<const PyValue> args,
                           Context& context) {
  expect_arity(args, 1, 3, callable, context);
  const auto& code = str_arg(args[0], "numpy.dtype code", context);
  if (!code.empty() && code[0] == 'O')
    context.fail("numpy object arrays (dtype " + quoted(code, kShownChars, '\'') +
                 ") hold pickled Python objects and are not supported");
  std::uint64_t itemsize = 0;
  bool digits = code.size() >= 2 && code.size() <= 4;
  for (std::size_t i = 1; digits && i < code.size(); ++i) {
    if (code[i] < '0' || code[i] > '9')
      digits = false;
    else
      itemsize = itemsize * 10 + static_cast<std::uint64_t>(code[i] - '0');
  }
  const auto dtype = digits ? numpy_dtype(code[0], itemsize) : std::nullopt;
  if (!dtype) context.fail("numpy dtype " + quoted(code, kShownChars, '\'') + " is not supported");
  auto* object = make_object<NumpyDTypeObject>(context.arena);
  object->code = code;
  object->dtype = *dtype;
  // A dtype without BUILD state has the writer's native order, little-endian everywhere numpy
  // pickles today; the state, when present, says so explicitly.
  return object;
}

const NumpyDTypeObject& built_dtype(const PyValue& value, const char* what, Context& context) {
  const auto* dtype = std::get_if<NumpyDTypeObject*>(&value);
  if (!dtype)
    context.fail(std::string(what) + " must be a numpy.dtype, not " +
                 std::string(kind_name(value)));
  return **dtype;
}

// A tensor over bytes the pickle itself holds; the Text keeps them alive, no copy.
std::shared_ptr<Tensor> tensor_over_text(const Text& data, DType dtype, bool big_endian,
                                         std::vector<std::int64_t> shape, bool fortran,
                                         Context& context) {
  auto tensor = std::make_shared<Tensor>();
  tensor->dtype = dtype;
  tensor->big_endian = big_endian && dtype_size(dtype) > 1;
  tensor->shape = std::move(shape);
  const std::size_t rank = tensor->shape.size();
  tensor->strides.assign(rank, 0);
  std::uint64_t numel = 1;
  for (std::size_t k = 0; k < rank; ++k) {
    const std::size_t i = fortran ? k : rank - 1 - k;
    tensor->strides[i] = static_cast<std::int64_t>(numel);
    auto next = checked_mul(numel, static_cast<std::uint64_t>(tensor->shape[i]));
    if (!next || *next > static_cast<std::uint64_t>(INT64_MAX))
      context.fail("numpy array shape overflows 64 bits");
    numel = *next;
  }
  const auto nbytes = checked_mul(numel, dtype_size(dtype));
  if (!nbytes || *nbytes != data->size())
    context.fail("numpy array data has " + std::to_string(data->size()) +
                 " bytes but its shape and dtype need " +
                 (nbytes ? std::to_string(*nbytes) : std::string("over 2^64")));
  auto storage = std::make_shared<Storage>();
  storage->bytes = std::as_bytes(std::span(data->data(), data->size()));
  storage->owner = data;
  tensor->storage = std::move(storage);
  try {
    tensor->check_bounds(context.options.file);
  } catch (const Error& error) {
    context.fail("numpy array " + error.cause());
  }
  return tensor;
}

PyValue numpy_scalar(const AllowedGlobal& callable, std::span<const PyValue> args,
                     Context& context) {
  expect_arity(args, 2, 2, callable, context);
  const auto& dtype = built_dtype(args[0], "numpy scalar dtype", context);
  const auto* bytes = std::get_if<Bytes>(&args[1]);
  if (!bytes)
    context.fail("numpy scalar data must be bytes, not " + std::string(kind_name(args[1])));
  return context.keep(tensor_over_text(context.texts[bytes->text], dtype.dtype, dtype.big_endian,
                                       {}, false, context));
}

// numpy's pickle protocol 5 form: _frombuffer(buffer, dtype, shape, order).
PyValue numpy_frombuffer(const AllowedGlobal& callable, std::span<const PyValue> args,
                         Context& context) {
  expect_arity(args, 4, 4, callable, context);
  const auto* bytes = std::get_if<Bytes>(&args[0]);
  if (!bytes) context.fail("numpy buffer must be bytes, not " + std::string(kind_name(args[0])));
  const auto& dtype = built_dtype(args[1], "numpy buffer dtype", context);
  auto shape = dims_arg(args[2], "numpy buffer shape", context);
  const auto& order = str_arg(args[3], "numpy buffer order", context);
  if (order != "C" && order != "F") context.fail("numpy buffer order must be 'C' or 'F'");
  return context.keep(tensor_over_text(context.texts[bytes->text], dtype.dtype, dtype.big_endian,
                                       std::move(shape), order == "F", context));
}

void build_numpy_dtype(NumpyDTypeObject& dtype, const PyValue& state, Context& context) {
  if (dtype.built || dtype.frozen) context.fail("numpy.dtype is built twice");
  const auto& items = tuple_items(state, "numpy.dtype state", context);
  if (items.size() < 5) context.fail("numpy.dtype state has too few entries");
  const auto& order = str_arg(items[1], "numpy.dtype byte order", context);
  if (order != "<" && order != ">" && order != "|" && order != "=")
    context.fail("numpy.dtype byte order " + quoted(order, kShownChars, '\'') +
                 " is not understood");
  for (std::size_t i = 2; i < 5; ++i)
    if (!std::holds_alternative<PyNone>(items[i]))
      context.fail("structured or sub-array numpy dtypes are not supported");
  dtype.big_endian = order == ">" && dtype_size(dtype.dtype) > 1;
  dtype.built = true;
}

void build_ndarray(NdArrayObject& array, const PyValue& state, Context& context) {
  if (array.tensor || array.frozen) context.fail("numpy array is built twice");
  const auto& items = tuple_items(state, "numpy array state", context);
  // (version, shape, dtype, is_fortran, data), or without the version from old numpy.
  if (items.size() != 4 && items.size() != 5)
    context.fail("numpy array state must have 4 or 5 entries");
  const std::size_t base = items.size() - 4;
  auto shape = dims_arg(items[base], "numpy array shape", context);
  const auto& dtype = built_dtype(items[base + 1], "numpy array dtype", context);
  const bool fortran = bool_arg(items[base + 2], "numpy array order", context);
  if (std::holds_alternative<PyList*>(items[base + 3]))
    context.fail("numpy object arrays hold pickled Python objects and are not supported");
  const auto* data = std::get_if<Bytes>(&items[base + 3]);
  if (!data)
    context.fail("numpy array data must be bytes, not " + std::string(kind_name(items[base + 3])));
  array.tensor =
      context.keep(tensor_over_text(context.texts[data->text], dtype.dtype, dtype.big_endian,
                                    std::move(shape), fortran, context));
}

}  // namespace

void Context::fail(const std::string& cause) const {
  throw Error(options.file, "",
              cause + " in " + options.name + " at byte " +
                  std::to_string(options.base_offset + opcode_offset));
}

const AllowedGlobal* find_allowed_global(std::string_view module, std::string_view name) noexcept {
  for (const auto& entry : kAllowed)
    if (entry.module == module && entry.name == name) return &entry;
  return nullptr;
}

std::string global_name(const AllowedGlobal& global) {
  return std::string(global.module) + "." + std::string(global.name);
}

PyValue call_global(const AllowedGlobal& callable, std::span<const PyValue> args,
                    Context& context) {
  switch (callable.kind) {
    case K::ordered_dict: {
      expect_arity(args, 0, 0, callable, context);
      auto* dict = make_object<PyDict>(context.arena);
      dict->ordered = true;
      return dict;
    }
    case K::counter: {
      // A dict subclass; pickled as Counter({key: count, ...}) (its __reduce__), or Counter().
      // The argument dict is the result: it is already frozen, so a pickle that goes on to
      // change the Counter (which Python would allow) is refused.
      expect_arity(args, 0, 1, callable, context);
      if (args.empty()) return make_object<PyDict>(context.arena);
      if (!std::holds_alternative<PyDict*>(args[0]))
        context.fail("collections.Counter takes a dict, not " + std::string(kind_name(args[0])));
      return args[0];
    }
    case K::torch_size: {
      expect_arity(args, 1, 1, callable, context);
      auto* size = make_object<PyList>(context.arena);
      size->is_tuple = true;
      for (auto dim : dims_arg(args[0], "torch.Size", context)) size->items.emplace_back(dim);
      return size;
    }
    case K::rebuild_tensor:
    case K::rebuild_tensor_v2:
    case K::rebuild_tensor_v3:
      return rebuild_tensor(callable, args, context);
    case K::rebuild_parameter:
      expect_arity(args, 3, 3, callable, context);
      return tensor_arg(args[0], "parameter data", context);
    case K::rebuild_parameter_with_state:
      expect_arity(args, 4, 4, callable, context);
      return tensor_arg(args[0], "parameter data", context);
    case K::parameter:
      expect_arity(args, 1, 2, callable, context);
      return tensor_arg(args[0], "parameter data", context);
    case K::codecs_encode:
      return codecs_encode(callable, args, context);
    case K::numpy_reconstruct: {
      expect_arity(args, 3, 3, callable, context);
      const auto* type = std::get_if<GlobalRef>(&args[0]);
      if (!type || type->entry->kind != K::numpy_ndarray)
        context.fail("numpy _reconstruct is only supported for numpy.ndarray");
      return make_object<NdArrayObject>(context.arena);
    }
    case K::numpy_dtype:
      return numpy_dtype_object(callable, args, context);
    case K::numpy_scalar:
      return numpy_scalar(callable, args, context);
    case K::numpy_frombuffer:
      return numpy_frombuffer(callable, args, context);
    case K::storage_type:
    case K::untyped_storage:
    case K::torch_dtype:
    case K::numpy_ndarray:
      break;
  }
  context.fail("'" + global_name(callable) + "' cannot be called");
}

void build(PyValue& target, const PyValue& state, Context& context) {
  if (auto* dict = std::get_if<PyDict*>(&target)) {
    // An OrderedDict's BUILD state is its instance __dict__ (e.g. a state_dict's _metadata),
    // not its items; it is dropped.
    if (!(*dict)->ordered) context.fail("BUILD on a plain dict is not supported");
    if (!std::holds_alternative<PyDict*>(state) && !std::holds_alternative<PyNone>(state))
      context.fail("OrderedDict state must be a dict, not " + std::string(kind_name(state)));
    return;
  }
  if (auto* dtype = std::get_if<NumpyDTypeObject*>(&target))
    return build_numpy_dtype(**dtype, state, context);
  if (auto* array = std::get_if<NdArrayObject*>(&target))
    return build_ndarray(**array, state, context);
  context.fail("BUILD on " + std::string(kind_name(target)) + " is not supported");
}

// The number of a canonical decimal storage key, when the vector of numbered storages may hold it:
// at most 4 slots per storage seen so far (plus a start), so a hostile key like "999999999" cannot
// make the vector huge; such keys are hashed instead.
std::optional<std::size_t> storage_number(std::string_view key, std::size_t storages) {
  if (storages >= std::numeric_limits<std::uint32_t>::max() - 1) return std::nullopt;
  return canonical_decimal(key, 4 * static_cast<std::uint64_t>(storages) + 4096);
}

PyValue persistent_load(const PyValue& pid, Context& context) {
  const auto& items = tuple_items(pid, "persistent id", context);
  if (items.size() != 5 && items.size() != 6)
    context.fail("persistent id must be ('storage', type, key, location, numel)");
  if (str_arg(items[0], "persistent id tag", context) != "storage")
    context.fail("persistent id must start with 'storage'");
  const auto* type = std::get_if<GlobalRef>(&items[1]);
  if (!type || (type->entry->kind != K::storage_type && type->entry->kind != K::untyped_storage))
    context.fail("persistent id storage type must be a torch storage class, not " +
                 std::string(kind_name(items[1])));
  const auto& key = str_arg(items[2], "storage key", context);
  str_arg(items[3], "storage location", context);
  const auto numel = int_arg(items[4], "storage size", context);
  if (numel < 0) context.fail("storage size is negative");
  // Legacy files add view metadata, which torch 1.x always writes as None.
  if (items.size() == 6 && !std::holds_alternative<PyNone>(items[5]))
    context.fail("storage views in legacy files are not supported");
  const DType dtype = type->entry->dtype;
  const auto nbytes = checked_mul(static_cast<std::uint64_t>(numel), dtype_size(dtype));
  if (!nbytes) context.fail("storage size overflows 64 bits");

  const std::size_t next = context.result.storages.size();
  std::size_t index = next;
  if (const auto number = storage_number(key, next)) {
    auto& slots = context.numbered_storages;
    if (*number >= slots.size()) slots.resize(*number + 1, 0);
    if (slots[*number] == 0) {
      // A number beyond the vector's reach when first seen went to the hash map.
      const auto hashed = context.storage_index.empty() ? context.storage_index.end()
                                                        : context.storage_index.find(key);
      slots[*number] = static_cast<std::uint32_t>(
          (hashed != context.storage_index.end() ? hashed->second : next) + 1);
    }
    index = slots[*number] - 1;
  } else {
    index = context.storage_index.emplace(key, next).first->second;
  }
  if (index != next) {
    const StorageRef& existing = context.result.storages[index];
    if (existing.dtype != dtype || existing.numel != static_cast<std::uint64_t>(numel))
      context.fail("storage " + quoted(key, kShownChars, '\'') +
                   " is declared twice with different types or sizes");
    return StorageHandle{index};
  }
  StorageRef ref;
  ref.key = key;
  ref.dtype = dtype;
  ref.numel = static_cast<std::uint64_t>(numel);
  ref.nbytes = *nbytes;
  ref.storage = std::make_shared<Storage>();
  context.result.storages.push_back(std::move(ref));
  return StorageHandle{next};
}

std::string_view kind_name(const PyValue& value) noexcept {
  struct Namer {
    std::string_view operator()(const PyNone&) const { return "None"; }
    std::string_view operator()(bool) const { return "bool"; }
    std::string_view operator()(std::int64_t) const { return "int"; }
    std::string_view operator()(const BigInt&) const { return "int"; }
    std::string_view operator()(double) const { return "float"; }
    std::string_view operator()(const Str&) const { return "str"; }
    std::string_view operator()(const Bytes&) const { return "bytes"; }
    std::string_view operator()(const PyList* list) const {
      return list->is_tuple ? "tuple" : "list";
    }
    std::string_view operator()(const PyDict*) const { return "dict"; }
    std::string_view operator()(const GlobalRef&) const { return "a global"; }
    std::string_view operator()(const StorageHandle&) const { return "storage"; }
    std::string_view operator()(const TensorHandle&) const { return "tensor"; }
    std::string_view operator()(const NumpyDTypeObject*) const { return "numpy.dtype"; }
    std::string_view operator()(const NdArrayObject*) const { return "numpy.ndarray"; }
  };
  return std::visit(Namer{}, value);
}

}  // namespace gpucache::detail::pickle
