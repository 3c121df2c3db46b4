// The fixtures of rows of any shape (tests/data/shapes, written by Debian's numpy and torch 1.13;
// tests/data/shapes_pypi, written by torch 2.x and huggingface's safetensors): each parses with
// gpucache's readers into exactly what its .expected.json describes, and `gpucache probe` reads
// it. How their contents map to columns belongs to the schema's tests. numpy string arrays read as
// text (a list of str); the '|S' fixture holds a Latin-1 byte, which is not UTF-8 and is refused
// naming the element (numpy's own astype(str) refuses it too: it decodes 'S' as ASCII).
// scripts/fixtures/_shapes_data.py describes the .expected.json format.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpucache/common/float_convert.hpp"
#include "gpucache/common/hash.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/input.hpp"
#include "gpucache/npy.hpp"
#include "test_support.hpp"
#include "zip/zip.hpp"

using namespace gpucache;
using test_support::data_path;
using test_support::run_cli;
using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Every fixture a reader accepts today.
const std::vector<std::string> kReadable{"shapes/images_u8.npy",
                                         "shapes/images_f32.npy",
                                         "shapes/labels.npy",
                                         "shapes/keypoints.npy",
                                         "shapes/image_dict.pt",
                                         "shapes/image_arrays.npz",
                                         "shapes/tokens_lists.pt",
                                         "shapes/tokens_tensors.pt",
                                         "shapes/tokens.jsonl",
                                         "shapes_pypi/image_dict.pt",
                                         "shapes_pypi/tokens_lists.pt",
                                         "shapes_pypi/tokens_tensors.pt",
                                         "shapes_pypi/image_tensors.safetensors",
                                         "shapes/strings_unicode.npy",
                                         "shapes/text_embeddings.npz"};

Json expected_for(const std::string& fixture) {
  const fs::path path = data_path(fixture);
  std::ifstream in(path.parent_path() / (path.stem().string() + ".expected.json"));
  REQUIRE_MESSAGE(in.good(), fixture);
  return Json::parse(in);
}

std::vector<std::byte> row_major(const Tensor& tensor) {
  std::vector<std::byte> bytes(tensor.nbytes());
  tensor.copy_row_major(0, bytes);
  return bytes;
}

// The elements as doubles (the fixtures' integers are below 2^53).
std::vector<double> numbers(const Tensor& tensor) {
  const auto bytes = row_major(tensor);
  std::vector<double> out(tensor.numel());
  const std::byte* at = bytes.data();
  for (std::size_t i = 0; i < out.size(); ++i, at += dtype_size(tensor.dtype)) {
    switch (tensor.dtype) {
      case DType::i64: {
        std::int64_t v;
        std::memcpy(&v, at, 8);
        out[i] = static_cast<double>(v);
        break;
      }
      case DType::u8:
        out[i] = static_cast<double>(std::to_integer<std::uint8_t>(*at));
        break;
      default: {
        REQUIRE(detail::widens_to_f32(tensor.dtype));
        float v;
        detail::widen_to_f32(tensor.dtype, at, &v, 1);
        out[i] = v;
      }
    }
  }
  return out;
}

void check_node(const Value& actual, const Json& expected, const std::string& where) {
  CAPTURE(where);
  const std::string type = expected.at("type");
  if (type == "dict") {
    const Dict* dict = actual.as_dict();
    REQUIRE(dict != nullptr);
    REQUIRE(dict->items.size() == expected["items"].size());
    for (std::size_t i = 0; i < dict->items.size(); ++i) {
      CHECK(dict->items[i].first == expected["items"][i][0].get<std::string>());
      check_node(dict->items[i].second, expected["items"][i][1],
                 where + "." + dict->items[i].first);
    }
  } else if (type == "list" && actual.as_tensor()) {
    // JSON lines: a numeric array is read as a 1-D f32 tensor.
    std::vector<double> values;
    for (const auto& item : expected["items"]) values.push_back(item.at("value").get<double>());
    CHECK(actual.as_tensor()->shape == std::vector<std::int64_t>{std::int64_t(values.size())});
    CHECK(numbers(*actual.as_tensor()) == values);
  } else if (type == "list") {
    const List* list = actual.as_list();
    REQUIRE(list != nullptr);
    REQUIRE(list->items.size() == expected["items"].size());
    for (std::size_t i = 0; i < list->items.size(); ++i)
      check_node(list->items[i], expected["items"][i], where + "[" + std::to_string(i) + "]");
  } else if (type == "strings") {
    // A 1-D numpy string array: a list of str, decoded to UTF-8 with trailing NULs stripped.
    const List* list = actual.as_list();
    REQUIRE(list != nullptr);
    REQUIRE(list->items.size() == expected["values"].size());
    for (std::size_t i = 0; i < list->items.size(); ++i) {
      REQUIRE(list->items[i].as_string() != nullptr);
      CHECK(*list->items[i].as_string() == expected["values"][i].get<std::string>());
    }
  } else if (type == "int") {
    REQUIRE(actual.as_int() != nullptr);
    CHECK(*actual.as_int() == expected["value"].get<std::int64_t>());
  } else if (type == "str") {
    REQUIRE(actual.as_string() != nullptr);
    CHECK(*actual.as_string() == expected["value"].get<std::string>());
  } else if (type == "tensor") {
    const Tensor* tensor = actual.as_tensor();
    REQUIRE(tensor != nullptr);
    CHECK(dtype_name(tensor->dtype) == expected["dtype"].get<std::string>());
    CHECK(tensor->shape == expected["shape"].get<std::vector<std::int64_t>>());
    const auto bytes = row_major(*tensor);
    CHECK(detail::hex64(detail::xxh3_64(bytes)) == expected["xxh3"].get<std::string>());
    const auto values = numbers(*tensor);
    const auto listed = expected.contains("values") ? expected["values"] : expected["head"];
    REQUIRE(listed.size() <= values.size());
    for (std::size_t i = 0; i < listed.size(); ++i) CHECK(values[i] == listed[i].get<double>());
    if (expected.contains("same_as")) {
      const Value same = read_input(data_path(expected["same_as"])).tree;
      CHECK(row_major(*same.as_tensor()) == bytes);
    }
  } else {
    FAIL("unknown expected node type " << type);
  }
}

std::string hex_of(std::span<const std::byte> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string text;
  for (std::byte b : bytes) {
    text += digits[std::to_integer<unsigned>(b) >> 4];
    text += digits[std::to_integer<unsigned>(b) & 15];
  }
  return text;
}

// A numpy string array as stored: the .npy header's descr and shape, and the raw bytes after it.
void check_npy_strings(std::span<const std::byte> npy, const Json& expected) {
  REQUIRE(npy.size() > 10);
  REQUIRE(std::memcmp(npy.data(), "\x93NUMPY\x01\x00", 8) == 0);
  const std::size_t header_size =
      std::to_integer<std::size_t>(npy[8]) | std::to_integer<std::size_t>(npy[9]) << 8;
  const std::string header(reinterpret_cast<const char*>(npy.data()) + 10, header_size);
  CHECK(header.find("'descr': '" + expected["dtype"].get<std::string>() + "'") !=
        std::string::npos);
  CHECK(header.find("'shape': (" + std::to_string(expected["shape"][0].get<int>()) + ",)") !=
        std::string::npos);
  CHECK(hex_of(npy.subspan(10 + header_size)) == expected["hex"].get<std::string>());
}

}  // namespace

TEST_CASE("every shapes fixture parses into what its .expected.json describes") {
  for (const auto& fixture : kReadable) {
    CAPTURE(fixture);
    const Json expected = expected_for(fixture);
    check_node(read_input(data_path(fixture)).tree, expected["value"], fixture);
    // Which library versions wrote it: Debian's torch 1.13 or PyPI's torch 2.x.
    const auto& made_by = expected["made_by"];
    if (fixture.ends_with(".pt")) {
      REQUIRE(made_by.contains("torch"));
      const bool pypi = fixture.starts_with("shapes_pypi/");
      CHECK(made_by["torch"].get<std::string>().starts_with(pypi ? "2." : "1.13"));
    }
    if (fixture.ends_with(".safetensors")) CHECK(made_by.contains("safetensors"));
  }
}

TEST_CASE("torch 1.13 and torch 2.x wrote the same tensors and lists") {
  for (const char* name : {"image_dict.pt", "tokens_lists.pt", "tokens_tensors.pt"}) {
    CAPTURE(name);
    CHECK(expected_for(std::string("shapes/") + name)["value"] ==
          expected_for(std::string("shapes_pypi/") + name)["value"]);
  }
}

TEST_CASE("gpucache probe reads every shapes fixture") {
  std::vector<std::string> arguments{"probe", "--json"};
  for (const auto& fixture : kReadable) arguments.push_back(data_path(fixture));
  const auto result = run_cli(arguments);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const auto probed = Json::parse(result.out);
  REQUIRE(probed.size() == kReadable.size());
  for (std::size_t i = 0; i < kReadable.size(); ++i) {
    CHECK(probed[i]["file"] == data_path(kReadable[i]));
    CHECK(probed[i].contains("tree"));
  }
}

TEST_CASE("the numpy string fixtures hold the strings their .expected.json lists") {
  for (const char* fixture : {"shapes/strings_unicode.npy", "shapes/strings_bytes.npy"}) {
    CAPTURE(fixture);
    const auto file = detail::MappedFile::open(data_path(fixture));
    check_npy_strings(file->bytes(), expected_for(fixture)["value"]);
  }
  const Json expected = expected_for("shapes/text_embeddings.npz")["value"];
  const detail::ZipArchive archive(
      detail::MappedFile::open(data_path("shapes/text_embeddings.npz")));
  const auto* texts = archive.find("texts.npy");
  REQUIRE(texts != nullptr);
  check_npy_strings(archive.read(*texts).bytes, expected["items"][0][1]);
  const auto* embeddings = archive.find("embeddings.npy");
  REQUIRE(embeddings != nullptr);
  const Storage storage = archive.read(*embeddings);
  check_node(parse_npy(storage.bytes, nullptr, "embeddings.npy"), expected["items"][1][1],
             "embeddings");
}

TEST_CASE("a bytes ('|S') array that is not UTF-8 is refused naming the element") {
  try {
    (void)read_input(data_path("shapes/strings_bytes.npy"));
    FAIL("strings_bytes.npy was read");
  } catch (const Error& error) {
    CHECK(std::string(error.what()).find("element [3] (\"latin-1 \\xe9\") is not UTF-8 text") !=
          std::string::npos);
  }
}

TEST_CASE("the shapes fixtures stay small") {
  std::uintmax_t total = 0;
  for (const char* folder : {"shapes", "shapes_pypi"})
    for (const auto& entry : fs::directory_iterator(data_path(folder))) {
      CAPTURE(entry.path());
      CHECK(entry.file_size() < 256 * 1024);
      total += entry.file_size();
    }
  CHECK(total < 2 * 1024 * 1024);
}

TEST_CASE("numpy string arrays pack as text columns, alone and beside embeddings in an .npz") {
  test_support::ScratchDir scratch;
  const auto alone =
      run_cli({"pack", data_path("shapes/strings_unicode.npy"), "-o", scratch / "alone", "-q"});
  INFO(alone.err);
  REQUIRE(alone.exit_code == 0);
  const auto alone_columns = Json::parse(run_cli({"inspect", "--json", scratch / "alone"}).out);
  CHECK(alone_columns.dump().find("\"strings_unicode\"") != std::string::npos);
  const auto paired =
      run_cli({"pack", data_path("shapes/text_embeddings.npz"), "-o", scratch / "paired", "-q"});
  INFO(paired.err);
  REQUIRE(paired.exit_code == 0);
  const auto exported =
      run_cli({"export", scratch / "paired", scratch / "out", "--column", "text"});
  INFO(exported.err);
  REQUIRE(exported.exit_code == 0);
  std::ifstream lines(scratch / "out/text.jsonl");
  std::vector<std::string> texts;
  for (std::string line; std::getline(lines, line);) texts.push_back(Json::parse(line));
  const Json expected = expected_for("shapes/text_embeddings.npz")["value"]["items"][0][1];
  CHECK(texts == expected["values"].get<std::vector<std::string>>());
}
