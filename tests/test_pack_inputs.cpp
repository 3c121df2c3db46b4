// pack on every input format and layout: the stored columns equal what the reader maps (which
// test_pt, test_safetensors, test_jsonl and test_npz compare with what torch/numpy wrote), bit for
// bit once the padding is stripped, and texts are equal.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpucache/error.hpp"
#include "gpucache/input.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/schema.hpp"
#include "gpucache/shard_io/shard_reader.hpp"
#include "gpucache/verify.hpp"
#include "test_support.hpp"

using namespace gpucache;
using test_support::data_path;

namespace {

void check_packed_equals_mapping(const std::string& input,
                                 std::optional<SourceKind> kind = std::nullopt,
                                 std::vector<FieldSpec> fields = {}) {
  CAPTURE(input);
  test_support::ScratchDir scratch;
  PackOptions options;
  options.inputs = {input};
  options.output_dir = scratch / "ds";
  options.kind = kind;
  options.fields = fields;
  options.validation.norm_min = 1e-30;  // keep every row: this test is about values, not rules
  options.validation.norm_max = 1e30;
  const auto result = pack(options);
  REQUIRE(verify(options.output_dir).ok());

  const Value root = read_input(input).tree;
  const SourceMapping mapping = map_source(root, input, kind, fields);
  REQUIRE(result.rows == mapping.rows);
  shard::ShardReader reader(options.output_dir + "/shard-00000.gcs");
  for (const InputColumn& column : mapping.columns) {
    CAPTURE(column.name);
    const auto index = reader.find_column(column.name);
    REQUIRE(index.has_value());
    if (column.kind == ColumnKind::text) {
      for (std::uint64_t r = 0; r < mapping.rows; ++r)
        CHECK(reader.text(*index, r) == read_text(column, r));
      continue;
    }
    if (column.kind == ColumnKind::sequence) {  // token ids beside an LLM cache's columns
      for (std::uint64_t r = 0; r < mapping.rows; ++r) {
        std::vector<std::byte> expected(column.row_length(r) * dtype_size(column.dtype));
        column.read_sequence(r, expected);
        const auto stored = reader.values(*index, r);
        CHECK(std::equal(stored.begin(), stored.end(), expected.begin(), expected.end()));
      }
      continue;
    }
    const auto& entry = reader.layout().columns[*index];
    CHECK(entry.dtype == (column.dtype == DType::f64 ? DType::f32 : column.dtype));
    const std::uint64_t row_bytes = column.row_elements() * dtype_size(entry.dtype);
    std::vector<std::byte> expected(mapping.rows * row_bytes);
    read_rows_as(column, 0, mapping.rows, entry.dtype, expected);
    for (std::uint64_t r = 0; r < mapping.rows; ++r) {
      CHECK(std::memcmp(reader.tensor_data(*index).data() + r * entry.row_pitch_bytes(),
                        expected.data() + r * row_bytes, row_bytes) == 0);
      for (std::uint64_t b = row_bytes; b < entry.row_pitch_bytes(); ++b)
        CHECK(reader.tensor_data(*index)[r * entry.row_pitch_bytes() + b] == std::byte{0});
    }
  }
}

}  // namespace

TEST_CASE("torch .pt layouts pack to the values torch wrote") {
  for (const char* name :
       {"dialogue_list", "dialogue_dict", "embeddings", "embeddings_dict", "llm_cache",
        "llm_cache_lists", "legacy", "big_endian", "dialogue_unaligned"}) {
    const std::string path = data_path(std::string("pt/") + name + ".pt");
    if (std::string(name) == "legacy" || std::string(name) == "big_endian") {
      // Not one of the three layouts: pack the first float matrix explicitly if there is one.
      const Value root = read_input(path).tree;
      try {
        map_source(root, path);
      } catch (const Error&) {
        continue;
      }
    }
    check_packed_equals_mapping(path);
  }
}

TEST_CASE(
    "dialogue list of dicts: stored rows equal torch's values from the fixture's expected JSON") {
  test_support::ScratchDir scratch;
  PackOptions options;
  options.inputs = {data_path("pt/dialogue_list.pt")};
  options.output_dir = scratch / "ds";
  pack(options);
  std::ifstream stream(data_path("pt/dialogue_list.expected.json"));
  const auto expected = nlohmann::json::parse(stream)["value"]["items"];
  shard::ShardReader reader(options.output_dir + "/shard-00000.gcs");
  const auto q = *reader.find_column("question_embedding");
  const auto text = *reader.find_column("question");
  REQUIRE(reader.rows() == expected.size());
  for (std::size_t r = 0; r < expected.size(); ++r) {
    nlohmann::json question, embedding;
    for (const auto& item : expected[r]["items"]) {
      if (item[0] == "question") question = item[1];
      if (item[0] == "question_embedding") embedding = item[1];
    }
    CHECK(reader.text(text, r) == question["value"].get<std::string>());
    const float* row = reinterpret_cast<const float*>(
        reader.tensor_data(q).data() + r * reader.layout().columns[q].row_pitch_bytes());
    for (std::size_t i = 0; i < embedding["values"].size(); ++i)
      CHECK(row[i] == embedding["values"][i].get<float>());
  }
}

TEST_CASE("safetensors, npz and JSONL inputs pack to the values their readers map") {
  check_packed_equals_mapping(data_path("safetensors/multi.safetensors"));
  check_packed_equals_mapping(data_path("npz/stored.npz"), SourceKind::embeddings,
                              {{"embedding", "f32"}});
  check_packed_equals_mapping(data_path("npz/deflated.npz"), SourceKind::embeddings,
                              {{"embedding", "f32"}});
  check_packed_equals_mapping(data_path("jsonl/dialogue.jsonl"));
  check_packed_equals_mapping(data_path("jsonl/llm_cache.jsonl"));
}

TEST_CASE("inputs of different formats and layouts of one kind concatenate") {
  test_support::ScratchDir scratch;
  PackOptions options;
  options.inputs = {data_path("pt/dialogue_list.pt"), data_path("pt/dialogue_dict.pt")};
  options.output_dir = scratch / "ds";
  const auto result = pack(options);
  CHECK(result.rows > 3);
  CHECK(verify(options.output_dir).ok());
}

TEST_CASE(
    "malicious pickles are refused before anything is written, and nothing they ask for happens") {
  test_support::ScratchDir scratch;
  for (const char* name : {"malicious.pt", "malicious_protocol4.pt", "malicious_legacy.pt"}) {
    const auto result =
        test_support::run_cli({"pack", data_path(std::string("pt/") + name), "-o", scratch / "ds"});
    CAPTURE(name);
    CHECK(result.exit_code == 2);
    CHECK(result.err.find("refusing global 'posix.system'") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(scratch / "ds/manifest.json"));
  }
}

TEST_CASE("probe shows the tree and the mapping without loading data; --json parses") {
  const auto text = test_support::run_cli({"probe", data_path("pt/dialogue_list.pt")});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("layout: dialogue") != std::string::npos);
  const auto json = test_support::run_cli({"probe", data_path("pt/llm_cache.pt"), "--json"});
  REQUIRE(json.exit_code == 0);
  const auto parsed = nlohmann::json::parse(json.out);
  CHECK(parsed.is_array());
  CHECK(parsed[0]["layout"]["kind"] == "llm-cache");
  CHECK(test_support::run_cli({"probe", data_path("pt/malicious.pt")}).exit_code == 2);
}
