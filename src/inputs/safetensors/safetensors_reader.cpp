// Reads .safetensors files (huggingface/safetensors): an 8-byte little-endian header length, a
// JSON header, then the tensors' raw bytes. The file is trusted for nothing: every check the
// reference implementation makes is made here, plus a few it skips (duplicate keys, unknown
// fields). Tensors point straight into the memory map. FORMAT.md lists what is accepted.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "gpucache/common/byte_reader.hpp"
#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/safetensors.hpp"

namespace gpucache {
namespace {

using Json = nlohmann::ordered_json;  // ordered: the Dict keeps the header's tensor order

// The reference implementation's cap: a larger header is a hostile or corrupt file.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";

struct SafetensorsDType {
  std::string_view name;
  DType dtype;
};

constexpr std::array<SafetensorsDType, 15> kDTypes{{
    {"F64", DType::f64},
    {"F32", DType::f32},
    {"F16", DType::f16},
    {"BF16", DType::bf16},
    {"I64", DType::i64},
    {"I32", DType::i32},
    {"I16", DType::i16},
    {"I8", DType::i8},
    {"U8", DType::u8},
    {"BOOL", DType::boolean},
    {"U16", DType::u16},
    {"U32", DType::u32},
    {"U64", DType::u64},
    {"F8_E4M3", DType::fp8_e4m3},
    {"F8_E5M2", DType::fp8_e5m2},
}};

std::string accepted_dtypes() {
  std::string text;
  for (const auto& entry : kDTypes) {
    if (!text.empty()) text += ", ";
    text += entry.name;
  }
  return text;
}

struct TensorEntry {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin;
  std::uint64_t end;
};

std::string tensor_location(std::string_view name) {
  return "tensor '" + std::string(name) + "'";
}

// nlohmann keeps the last of two equal keys; a header with duplicates is ambiguous, so refuse it.
Json parse_header(std::string_view text, const std::string& path) {
  std::vector<std::unordered_set<std::string>> open_objects;
  auto refuse_duplicates = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Json::parse_event_t::key && !open_objects.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second)
        throw Error(path, "header", "key \"" + key + "\" appears twice");
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), refuse_duplicates);
  } catch (const Json::exception& error) {
    // Drop nlohmann's exception id; its "line 1, column N" is the byte within the header.
    std::string cause = error.what();
    if (cause.starts_with("[json.exception")) cause.erase(0, cause.find("] ") + 2);
    throw Error(path, "header", "is not valid JSON: " + cause);
  }
}

std::uint64_t offset_field(const Json& value, const std::string& path, const std::string& where) {
  if (!value.is_number_unsigned())
    throw Error(path, where, "data_offsets must hold non-negative integers, found " + value.dump());
  return value.get<std::uint64_t>();
}

TensorEntry parse_entry(const std::string& name, const Json& entry, const std::string& path) {
  const std::string where = tensor_location(name);
  if (!entry.is_object())
    throw Error(path, where, std::string("must be a JSON object, found ") + entry.type_name());
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      throw Error(path, where, "has an unknown field \"" + key + "\"");
  }
  auto field = [&](const char* key) -> const Json& {
    auto found = entry.find(key);
    if (found == entry.end()) throw Error(path, where, std::string("has no \"") + key + "\" field");
    return *found;
  };

  TensorEntry result{name, DType::f32, {}, 0, 0};
  const Json& dtype = field("dtype");
  if (!dtype.is_string()) throw Error(path, where, "dtype must be a string, found " + dtype.dump());
  const auto& dtype_text = dtype.get_ref<const std::string&>();
  auto known = std::find_if(kDTypes.begin(), kDTypes.end(),
                            [&](const auto& candidate) { return candidate.name == dtype_text; });
  if (known == kDTypes.end())
    throw Error(
        path, where,
        "dtype \"" + dtype_text + "\" is not supported (accepted: " + accepted_dtypes() + ")");
  result.dtype = known->dtype;

  const Json& shape = field("shape");
  if (!shape.is_array()) throw Error(path, where, "shape must be an array, found " + shape.dump());
  for (const auto& extent : shape) {
    if (!extent.is_number_unsigned() ||
        extent.get<std::uint64_t>() > std::uint64_t{std::numeric_limits<std::int64_t>::max()})
      throw Error(path, where,
                  "shape must hold non-negative integers below 2^63, found " + shape.dump());
    result.shape.push_back(static_cast<std::int64_t>(extent.get<std::uint64_t>()));
  }

  const Json& offsets = field("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2)
    throw Error(path, where, "data_offsets must be an array [begin, end], found " + offsets.dump());
  result.begin = offset_field(offsets[0], path, where);
  result.end = offset_field(offsets[1], path, where);
  if (result.begin > result.end)
    throw Error(path, where,
                "data_offsets [" + std::to_string(result.begin) + ", " +
                    std::to_string(result.end) + ") end before they begin");
  return result;
}

Value parse_metadata(const Json& metadata, const std::string& path) {
  const std::string where = "header __metadata__";
  if (!metadata.is_object())
    throw Error(path, where, std::string("must be a JSON object, found ") + metadata.type_name());
  auto dict = std::make_shared<Dict>();
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string())
      throw Error(path, where, "value of \"" + key + "\" must be a string, found " + value.dump());
    dict->items.emplace_back(key, Value(value.get<std::string>()));
  }
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
                      (previous ? "previous tensor '" + previous->name + "' ends at "
                                : std::string("data region starts at ")) +
                      std::to_string(covered) + ": a hole of " +
                      std::to_string(entry->begin - covered) + " bytes");
    if (entry->begin < covered)
      throw Error(path, tensor_location(entry->name),
                  "data_offsets [" + std::to_string(entry->begin) + ", " +
                      std::to_string(entry->end) + ") overlap tensor '" + previous->name +
                      "', which ends at " + std::to_string(covered));
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

  const Json header = parse_header(header_text, path);
  if (!header.is_object())
    throw Error(path, "header", std::string("must be a JSON object, found ") + header.type_name());

  std::vector<TensorEntry> entries;
  entries.reserve(header.size());
  Value metadata;
  bool has_metadata = false;
  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) {
      metadata = parse_metadata(entry, path);
      has_metadata = true;
      continue;
    }
    entries.push_back(parse_entry(name, entry, path));
    check_size(entries.back(), path);
  }
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
