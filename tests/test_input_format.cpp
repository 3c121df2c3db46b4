#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "gpucache/error.hpp"
#include "gpucache/input.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

namespace {

fs::path copy_without_extension(const std::string& source, const std::string& name) {
  const fs::path path = fs::temp_directory_path() / ("gpucache_test_input_" + name);
  fs::copy_file(source, path, fs::copy_options::overwrite_existing);
  return path;
}

std::string zip_head(const std::string& first_entry) {
  std::string head("PK\x03\x04", 4);
  head += std::string(22, '\0');
  head += static_cast<char>(first_entry.size());
  head += '\0';
  head += std::string(2, '\0');
  return head + first_entry;
}

}  // namespace

TEST_CASE("extensions pick the reader, case-insensitively") {
  CHECK(format_from_extension("a/b/model.PT") == InputFormat::pt);
  CHECK(format_from_extension("x.pth") == InputFormat::pt);
  CHECK(format_from_extension("pytorch_model.bin") == InputFormat::pt);
  CHECK(format_from_extension("m.safetensors") == InputFormat::safetensors);
  CHECK(format_from_extension("a.npy") == InputFormat::npy);
  CHECK(format_from_extension("a.npz") == InputFormat::npz);
  CHECK(format_from_extension("d.jsonl") == InputFormat::jsonl);
  CHECK(format_from_extension("d.json") == InputFormat::jsonl);
  CHECK(format_from_extension("d.ndjson") == InputFormat::jsonl);
  CHECK(format_from_extension("dir.pt/data") == std::nullopt);
  CHECK(format_from_extension(".pt") == std::nullopt);  // a hidden file named ".pt", no extension
  CHECK(input_format_name(InputFormat::safetensors) == "safetensors");
}

TEST_CASE("magic bytes pick the reader when the extension does not") {
  CHECK(format_from_magic("\x93NUMPY\x01\x00", 100) == InputFormat::npy);
  CHECK(format_from_magic(zip_head("arr_0.npy"), 100) == InputFormat::npz);
  CHECK(format_from_magic(zip_head("archive/data.pkl"), 100) == InputFormat::pt);
  CHECK(format_from_magic("\x80\x02\x8a\x0a", 100) == InputFormat::pt);
  CHECK(format_from_magic(std::string("\x02\0\0\0\0\0\0\0{}", 10), 10) == InputFormat::safetensors);
  // A header length past the end of the file is not safetensors.
  CHECK(format_from_magic(std::string("\xff\0\0\0\0\0\0\0{}", 10), 10) == std::nullopt);
  CHECK(format_from_magic("  {\"text\": 1}\n", 14) == InputFormat::jsonl);
  CHECK(format_from_magic("hello", 5) == std::nullopt);
  CHECK(format_from_magic("", 0) == std::nullopt);
}

TEST_CASE("detect_input_format reads the first bytes of real files") {
  const std::string data = GPUCACHE_TEST_DATA;
  auto safetensors = copy_without_extension(data + "/safetensors/multi.safetensors", "st");
  CHECK(detect_input_format(safetensors.string()) == InputFormat::safetensors);
  auto jsonl = copy_without_extension(data + "/jsonl/dialogue.jsonl", "jl");
  CHECK(detect_input_format(jsonl.string()) == InputFormat::jsonl);
  auto unknown = copy_without_extension(data + "/jsonl/broken/not_object.jsonl", "unknown");
  std::ofstream(unknown, std::ios::trunc) << "plain text";
  CHECK_THROWS_WITH(detect_input_format(unknown.string()),
                    doctest::Contains("cannot tell its format"));
  CHECK_THROWS_AS(detect_input_format("/nonexistent/file"), Error);
  for (const auto& path : {safetensors, jsonl, unknown}) fs::remove(path);
}
