#include <doctest/doctest.h>

#include <chrono>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "gpucache/error.hpp"
#include "gpucache/jsonl.hpp"
#include "gpucache/schema.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(GPUCACHE_TEST_DATA) + "/jsonl/";

nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// tmpfs when there is one: rewriting a truncated file on ext4 forces a flush each time.
fs::path scratch_dir() {
  std::error_code error;
  return fs::is_directory("/dev/shm", error) ? fs::path("/dev/shm") : fs::temp_directory_path();
}

fs::path write_temp(const std::string& name, const std::string& text) {
  const fs::path path = scratch_dir() / ("gpucache_test_jsonl_" + name + ".jsonl");
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<float> floats(const Tensor& tensor) {
  std::vector<float> out(tensor.numel());
  tensor.copy_row_major(0, std::as_writable_bytes(std::span(out)));
  return out;
}

std::vector<std::int64_t> int64s(const Tensor& tensor) {
  std::vector<std::int64_t> out(tensor.numel());
  tensor.copy_row_major(0, std::as_writable_bytes(std::span(out)));
  return out;
}

std::string error_of(const std::string& path) {
  try {
    read_jsonl(path);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

// Every key of every expected row matches: strings as str, number arrays as f32 [D] tensors (i64
// when every element is an integer literal), objects as dicts, integers as int.
void check_value(const Value& value, const nlohmann::json& expected) {
  if (expected.is_string()) {
    REQUIRE(value.as_string() != nullptr);
    CHECK(*value.as_string() == expected.get<std::string>());
  } else if (expected.is_array()) {
    const Tensor* tensor = value.as_tensor();
    REQUIRE(tensor != nullptr);
    const bool integers =
        !expected.empty() && std::all_of(expected.begin(), expected.end(),
                                         [](const auto& item) { return item.is_number_integer(); });
    CHECK(tensor->dtype == (integers ? DType::i64 : DType::f32));
    CHECK(tensor->shape == std::vector<std::int64_t>{static_cast<std::int64_t>(expected.size())});
    tensor->check_bounds("t");
    if (integers)
      CHECK(int64s(*tensor) == expected.get<std::vector<std::int64_t>>());
    else
      CHECK(floats(*tensor) == expected.get<std::vector<float>>());
  } else if (expected.is_object()) {
    const Dict* dict = value.as_dict();
    REQUIRE(dict != nullptr);
    CHECK(dict->items.size() == expected.size());
    for (const auto& [key, item] : expected.items()) {
      CAPTURE(key);
      REQUIRE(dict->find(key) != nullptr);
      check_value(*dict->find(key), item);
    }
  } else if (expected.is_number_integer()) {
    REQUIRE(value.as_int() != nullptr);
    CHECK(*value.as_int() == expected.get<std::int64_t>());
  } else {
    FAIL("unexpected JSON type in the expected file");
  }
}

void check_file(const std::string& name) {
  const Value root = read_jsonl(kData + name + ".jsonl");
  const nlohmann::json expected = load_json(kData + name + ".expected.json");
  const List* rows = root.as_list();
  REQUIRE(rows != nullptr);
  REQUIRE(rows->items.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    check_value(rows->items[i], expected[i]);
  }
}

}  // namespace

TEST_CASE("a dialogue file reads as a list of dicts with text and f32 embeddings") {
  check_file("dialogue");  // also has a blank line, a whitespace line and a CRLF line ending
}

TEST_CASE("an LLM cache reads with nested objects, integer arrays as i64, mixed ones as f32") {
  check_file("llm_cache");
}

TEST_CASE("all numeric arrays of a file share one storage") {
  const Value root = read_jsonl(kData + "dialogue.jsonl");
  const auto& rows = root.as_list()->items;
  const Tensor& first = *rows[0].as_dict()->find("question_embedding")->as_tensor();
  const Tensor& other = *rows[3].as_dict()->find("answer_embedding")->as_tensor();
  CHECK(first.storage == other.storage);
  CHECK(first.storage_offset != other.storage_offset);
}

TEST_CASE("the read files map to the expected dataset kinds") {
  const SourceMapping dialogue = map_source(read_jsonl(kData + "dialogue.jsonl"), "dialogue.jsonl");
  CHECK(dialogue.kind == SourceKind::dialogue);
  CHECK(dialogue.rows == 5);
  CHECK(dialogue.find("question_embedding")->dim() == 8);
  CHECK(read_text(*dialogue.find("answer"), 4) == "answer 4: 8 \u2713");

  const SourceMapping cache = map_source(read_jsonl(kData + "llm_cache.jsonl"), "llm_cache.jsonl");
  CHECK(cache.kind == SourceKind::llm_cache);
  CHECK(cache.rows == 4);
  std::vector<float> row(6);
  read_rows_as(*cache.find("embedding"), 2, 1, DType::f32, std::as_writable_bytes(std::span(row)));
  CHECK(row == std::vector<float>{1, 0, -1, 2, 0.5, 3});
}

TEST_CASE("vectors of differing length are refused by the mapping, naming the row") {
  const Value root = read_jsonl(kData + "differing_dims.jsonl");
  CHECK_THROWS_WITH(map_source(root, "differing_dims.jsonl"),
                    doctest::Contains("row 2 has 5 values (tensor f32 [5]) but row 0 has 4"));
}

TEST_CASE("every broken file is refused with an error naming the file and line") {
  const nlohmann::json expected = load_json(kData + "broken/expected_errors.json");
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(kData + "broken")) {
    if (entry.path().extension() != ".jsonl") continue;
    ++files;
    const std::string name = entry.path().filename().string();
    CAPTURE(name);
    REQUIRE_MESSAGE(expected.contains(name), "broken fixture without an expected error");
    const std::string message = error_of(entry.path().string());
    CAPTURE(message);
    CHECK(message.find(entry.path().string() + ": line 2") == 0);
    CHECK(message.find(expected[name].get<std::string>()) != std::string::npos);
  }
  CHECK(files == expected.size());
}

TEST_CASE("line numbers count blank lines") {
  const auto path = write_temp("blank_lines", "{\"a\": 1}\n\n\r\n{\"a\": [1, \"x\"]}\n");
  CHECK(error_of(path.string()).find(": line 4: \"a[1]\" mixes number and str") !=
        std::string::npos);
  fs::remove(path);
}

TEST_CASE("empty files, byte-order marks, escapes, scalars and empty arrays") {
  auto path = write_temp("empty", "\n  \n");
  CHECK(read_jsonl(path.string()).as_list()->items.empty());
  path = write_temp("bom",
                    "\xEF\xBB\xBF{\"t\": \"caf\\u00e9\", \"n\": null, \"b\": true, \"f\": 0.25, "
                    "\"big\": 18446744073709551615, \"e\": [], \"s\": [\"x\", \"y\"], "
                    "\"o\": [{\"k\": 1}]}");
  const Value root = read_jsonl(path.string());
  const Dict& row = *root.as_list()->items.at(0).as_dict();
  CHECK(*row.find("t")->as_string() == "caf\u00e9");
  CHECK(row.find("n")->is_none());
  CHECK(std::get<bool>(row.find("b")->data));
  CHECK(*row.find("f")->as_float() == 0.25);
  CHECK(*row.find("big")->as_float() == 18446744073709551615.0);
  CHECK(row.find("e")->as_tensor()->shape == std::vector<std::int64_t>{0});
  CHECK(row.find("s")->as_list()->items.size() == 2);
  CHECK(*row.find("o")->as_list()->items[0].as_dict()->find("k")->as_int() == 1);
  fs::remove(path);
  fs::remove(scratch_dir() / "gpucache_test_jsonl_empty.jsonl");
}

TEST_CASE("a missing file is an error") {
  CHECK(error_of(kData + "nope.jsonl").find("cannot open") != std::string::npos);
}

TEST_CASE("truncating a valid file anywhere gives rows or an error, never a crash") {
  std::ifstream in(kData + "dialogue.jsonl", std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::size_t refused = 0;
  for (std::size_t length = 0; length < text.size(); length += 7) {
    const auto path = write_temp("truncated", text.substr(0, length));
    try {
      read_jsonl(path.string());
    } catch (const Error&) {
      ++refused;
    }
  }
  CHECK(refused > 0);
  fs::remove(scratch_dir() / "gpucache_test_jsonl_truncated.jsonl");
}

TEST_CASE("a line holding a large object is read in linear time and still refuses repeated keys") {
  // 10^5 keys (issue #18): a parser that searched the keys so far for each new one would do 5 *
  // 10^9 comparisons; this one takes well under a second (release). The bound is generous for
  // sanitizer builds and a loaded CI machine.
  std::string line = "{";
  for (int i = 0; i < 100000; ++i) line += "\"text " + std::to_string(i) + "\": [0.5, 1.5], ";
  auto path = write_temp("large", line + "\"end\": []}\n");
  const auto start = std::chrono::steady_clock::now();
  const Value root = read_jsonl(path.string());
  const Dict& cache = *root.as_list()->items.at(0).as_dict();
  CHECK(cache.items.size() == 100001);
  CHECK(cache.items[99999].first == "text 99999");
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 30.0);
  path = write_temp("large", line + "\"text 5\": []}\n");
  CHECK(error_of(path.string()).find("line 1: key \"text 5\" appears twice") != std::string::npos);
  fs::remove(path);
}
