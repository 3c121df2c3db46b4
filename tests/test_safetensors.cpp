#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "gpucache/common/mapped_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/safetensors.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(GPUCACHE_TEST_DATA) + "/safetensors/";

nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The fuzz cases rewrite one file thousands of times: tmpfs when there is one, since rewriting a
// truncated file on ext4 forces a flush each time.
fs::path scratch_dir() {
  std::error_code error;
  return fs::is_directory("/dev/shm", error) ? fs::path("/dev/shm") : fs::temp_directory_path();
}

fs::path write_temp(const std::string& name, const std::string& bytes) {
  const fs::path path = scratch_dir() / ("gpucache_test_safetensors_" + name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Reference decoders, written independently of the library's.
float f16_value(std::uint16_t half) {
  const int exponent = (half >> 10) & 0x1f;
  const int significand = half & 0x3ff;
  float magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(significand), -24);
  else if (exponent == 31)
    magnitude = significand ? std::numeric_limits<float>::quiet_NaN()
                            : std::numeric_limits<float>::infinity();
  else
    magnitude = std::ldexp(static_cast<float>(significand + 1024), exponent - 25);
  return (half & 0x8000) ? -magnitude : magnitude;
}

float bf16_value(std::uint16_t bits) {
  const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

template <typename T>
T element(const Tensor& tensor, std::size_t index) {
  T value;
  std::memcpy(&value, tensor.contiguous_bytes().data() + index * sizeof(T), sizeof(T));
  return value;
}

// Compares every element of tensor with the expected JSON values, exactly.
void check_values(const Tensor& tensor, const nlohmann::json& expected) {
  REQUIRE(tensor.numel() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    switch (tensor.dtype) {
      case DType::f64:
        CHECK(element<double>(tensor, i) == expected[i].get<double>());
        break;
      case DType::f32:
        CHECK(element<float>(tensor, i) == expected[i].get<float>());
        break;
      case DType::f16:
        CHECK(f16_value(element<std::uint16_t>(tensor, i)) == expected[i].get<float>());
        break;
      case DType::bf16:
        CHECK(bf16_value(element<std::uint16_t>(tensor, i)) == expected[i].get<float>());
        break;
      case DType::i64:
        CHECK(element<std::int64_t>(tensor, i) == expected[i].get<std::int64_t>());
        break;
      case DType::i32:
        CHECK(element<std::int32_t>(tensor, i) == expected[i].get<std::int32_t>());
        break;
      case DType::i16:
        CHECK(element<std::int16_t>(tensor, i) == expected[i].get<std::int16_t>());
        break;
      case DType::i8:
        CHECK(element<std::int8_t>(tensor, i) == expected[i].get<std::int8_t>());
        break;
      case DType::u8:
      case DType::boolean:
        CHECK(element<std::uint8_t>(tensor, i) == expected[i].get<std::uint8_t>());
        break;
      case DType::u16:
        CHECK(element<std::uint16_t>(tensor, i) == expected[i].get<std::uint16_t>());
        break;
      case DType::u32:
        CHECK(element<std::uint32_t>(tensor, i) == expected[i].get<std::uint32_t>());
        break;
      case DType::u64:
        CHECK(element<std::uint64_t>(tensor, i) == expected[i].get<std::uint64_t>());
        break;
      default:
        FAIL("unexpected dtype");
    }
  }
}

void check_tensor(const Value& value, const nlohmann::json& expected) {
  const Tensor* tensor = value.as_tensor();
  REQUIRE(tensor != nullptr);
  CHECK(dtype_name(tensor->dtype) == expected["dtype"].get<std::string>());
  CHECK(tensor->shape == expected["shape"].get<std::vector<std::int64_t>>());
  CHECK(tensor->is_contiguous_le());
  tensor->check_bounds("t");
  check_values(*tensor, expected["values"]);
}

std::string error_of(const std::string& path) {
  try {
    read_safetensors(path);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("every supported dtype is read with its exact values") {
  const Value root = read_safetensors(kData + "all_dtypes.safetensors");
  const nlohmann::json expected = load_json(kData + "all_dtypes.expected.json");
  const Dict* dict = root.as_dict();
  REQUIRE(dict != nullptr);
  CHECK(dict->items.size() == expected.size());
  for (const auto& [name, entry] : expected.items()) {
    CAPTURE(name);
    const Value* value = dict->find(name);
    REQUIRE(value != nullptr);
    check_tensor(*value, entry);
  }
}

TEST_CASE("a multi-tensor file keeps header order, metadata, empty and scalar tensors") {
  const Value root = read_safetensors(kData + "multi.safetensors");
  const nlohmann::json expected = load_json(kData + "multi.expected.json");
  const Dict& dict = *root.as_dict();
  std::vector<std::string> order;
  for (const auto& [key, value] : dict.items) order.push_back(key);
  CHECK(order == expected["order"].get<std::vector<std::string>>());

  const Dict* metadata = dict.find("__metadata__")->as_dict();
  REQUIRE(metadata != nullptr);
  for (const auto& [key, text] : expected["__metadata__"].items()) {
    REQUIRE(metadata->find(key) != nullptr);
    CHECK(*metadata->find(key)->as_string() == text.get<std::string>());
  }
  for (const std::string name : {"flags", "embeddings", "empty", "ids", "scale"}) {
    CAPTURE(name);
    check_tensor(*dict.find(name), expected[name]);
  }
}

TEST_CASE("tensors are zero-copy views into the mapped file, even when unaligned") {
  const std::string path = kData + "multi.safetensors";
  const Value root = read_safetensors(path);
  const Tensor& embeddings = *root.as_dict()->find("embeddings")->as_tensor();
  auto file = std::static_pointer_cast<const detail::MappedFile>(embeddings.storage->owner);
  REQUIRE(file != nullptr);
  const std::byte* data = embeddings.contiguous_bytes().data();
  CHECK(data >= file->data());
  CHECK(data + embeddings.nbytes() <= file->data() + file->size());
  // The 3-byte flags tensor comes first, so the f32 data starts at an odd address.
  CHECK(reinterpret_cast<std::uintptr_t>(data) % 4 != 0);
}

TEST_CASE("a header listing tensors out of offset order is valid") {
  const Value root = read_safetensors(kData + "unsorted_header.safetensors");
  const Dict& dict = *root.as_dict();
  REQUIRE(dict.items.size() == 2);
  CHECK(dict.items[0].first == "b");  // header order, not offset order
  CHECK(element<float>(*dict.find("a")->as_tensor(), 1) == 2.0f);
  CHECK(element<float>(*dict.find("b")->as_tensor(), 0) == 3.0f);
}

TEST_CASE("every broken file is refused with an error naming the file and the problem") {
  const nlohmann::json expected = load_json(kData + "broken/expected_errors.json");
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(kData + "broken")) {
    if (entry.path().extension() != ".safetensors") continue;
    ++files;
    const std::string name = entry.path().filename().string();
    CAPTURE(name);
    REQUIRE_MESSAGE(expected.contains(name), "broken fixture without an expected error");
    const std::string message = error_of(entry.path().string());
    CAPTURE(message);
    CHECK(message.find(entry.path().string()) == 0);
    CHECK(message.find(expected[name].get<std::string>()) != std::string::npos);
  }
  CHECK(files == expected.size());
}

TEST_CASE("a missing file is an error, not a crash") {
  CHECK(error_of(kData + "no_such_file.safetensors").find("cannot open") != std::string::npos);
}

TEST_CASE("every truncation of a valid file is refused") {
  const std::string bytes = read_file(kData + "multi.safetensors");
  REQUIRE(bytes.size() > 100);
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    CAPTURE(length);
    const fs::path path = write_temp("truncated", bytes.substr(0, length));
    CHECK_THROWS_AS(read_safetensors(path.string()), Error);
  }
  fs::remove(scratch_dir() / "gpucache_test_safetensors_truncated");
}

TEST_CASE("corrupting any header byte gives a valid result or a gpucache::Error, nothing else") {
  const std::string bytes = read_file(kData + "multi.safetensors");
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  std::size_t refused = 0;
  for (std::size_t at = 0; at < 8 + header_length; ++at) {
    for (const unsigned char replacement : {'\0', '9', '"', '}', '\xff'}) {
      std::string corrupt = bytes;
      corrupt[at] = static_cast<char>(replacement);
      const fs::path path = write_temp("corrupt", corrupt);
      try {
        const Value root = read_safetensors(path.string());
        // Whatever was accepted must be internally consistent.
        for (const auto& [name, value] : root.as_dict()->items)
          if (const Tensor* tensor = value.as_tensor()) tensor->check_bounds(name);
      } catch (const Error&) {
        ++refused;
      }
    }
  }
  CHECK(refused > 0);
  fs::remove(scratch_dir() / "gpucache_test_safetensors_corrupt");
}
