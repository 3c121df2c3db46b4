// The ingest contract through the real binary (issue 27): every field of the user's data reaches
// the dataset under its own name and type, and the packer's own columns never take a user's name.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "gpucache/npy.hpp"
#include "gpucache/shard/shard_layout.hpp"
#include "pack_test_support.hpp"
#include "test_support.hpp"

using gpucache::DType;
using test_support::data_path;
using test_support::run_cli;
namespace fs = std::filesystem;

namespace {

nlohmann::json json_of(const test_support::RunResult& result) {
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE_NOTHROW(nlohmann::json::parse(result.out));
  return nlohmann::json::parse(result.out);
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ",") + name;
  return text;
}

template <typename T>
std::vector<T> npy_values(const std::string& path, DType dtype) {
  const gpucache::Value value = gpucache::read_npy(path);
  const auto* tensor = value.as_tensor();
  REQUIRE(tensor != nullptr);
  REQUIRE(tensor->dtype == dtype);
  const auto bytes = tensor->contiguous_bytes();
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

}  // namespace

TEST_CASE("user fields named source and source_row pack, verify and export as the user's") {
  test_support::ScratchDir scratch;
  const std::string dataset = scratch / "ds";
  const auto packed =
      run_cli({"pack", data_path("mapping/user_names.pt"), "-o", dataset, "--json"});
  REQUIRE_MESSAGE(packed.exit_code == 0, packed.err);
  CHECK(json_of(packed)["rows"] == 6);

  const auto verified = run_cli({"verify", dataset, "--json"});
  CHECK_MESSAGE(verified.exit_code == 0, verified.out);
  CHECK(json_of(verified)["ok"] == true);

  // The user's columns and the provenance columns side by side, each under its own name.
  std::vector<std::string> names;
  const auto inspected = json_of(run_cli({"inspect", dataset, "--json"}));
  for (const auto& column : inspected["columns"])
    names.push_back(column["name"].get<std::string>());
  CHECK(joined(names) == "embedding,source,source_row,@source,@source_row");

  REQUIRE(run_cli({"export", dataset, "--to", "npy", scratch / "out"}).exit_code == 0);
  CHECK(npy_values<std::int64_t>(scratch / "out/source.npy", DType::i64) ==
        std::vector<std::int64_t>{0, 10, 20, 30, 40, 50});
  CHECK(npy_values<std::int32_t>(scratch / "out/source_row.npy", DType::i32) ==
        std::vector<std::int32_t>{-3, -2, -1, 0, 1, 2});
  // Provenance: signed types, so torch computes with them (it cannot add u64).
  CHECK(npy_values<std::int32_t>(scratch / "out/@source.npy", DType::i32) ==
        std::vector<std::int32_t>(6, 0));
  CHECK(npy_values<std::int64_t>(scratch / "out/@source_row.npy", DType::i64) ==
        std::vector<std::int64_t>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("a user column cannot be named into the provenance namespace") {
  test_support::ScratchDir scratch;
  const auto packed = run_cli({"pack", data_path("mapping/user_names.pt"), "-o", scratch / "ds",
                               "--field", "@source=embedding", "--json"});
  CHECK(packed.exit_code == 2);
  CHECK(packed.out.find("@source") != std::string::npos);
}

TEST_CASE("every field of a list of dicts becomes a column, or is named as left out") {
  for (const std::string file : {"dialogue_fields.pt", "dialogue_fields.jsonl"}) {
    CAPTURE(file);
    test_support::ScratchDir scratch;
    const std::string input = data_path("mapping/" + file);
    const auto packed = run_cli({"pack", input, "-o", scratch / "ds", "--json"});
    REQUIRE_MESSAGE(packed.exit_code == 0, packed.out << packed.err);
    const auto result = json_of(packed);
    CHECK(result["rows"] == 4);
    // tags holds a list of str per row: no column can hold it, and pack says so.
    REQUIRE(result["left_out"].size() == 1);
    CHECK(result["left_out"][0]["input"] == input);
    CHECK(result["left_out"][0]["field"] == "[*].tags");
    CHECK_FALSE(result["left_out"][0]["reason"].get<std::string>().empty());
    CHECK(result["not_selected"].empty());

    std::vector<std::string> names;
    const auto inspected = json_of(run_cli({"inspect", scratch / "ds", "--json"}));
    for (const auto& column : inspected["columns"])
      names.push_back(column["name"].get<std::string>());
    CHECK(joined(names) ==
          "question_embedding,answer_embedding,question,answer,label,id,conversation_id,turn,"
          "meta.lang,meta.score,@source,@source_row");
    const auto manifest = test_support::read_bytes(scratch / "ds/manifest.json");
    const auto stored = nlohmann::json::parse(manifest.begin(), manifest.end());
    REQUIRE(stored["left_out"].size() == 1);
    CHECK(stored["left_out"][0]["field"] == "[*].tags");

    REQUIRE(run_cli({"export", scratch / "ds", "--to", "npy", scratch / "out"}).exit_code == 0);
    CHECK(npy_values<std::int64_t>(scratch / "out/id.npy", DType::i64) ==
          std::vector<std::int64_t>{1000, 1001, 1002, 1003});
    CHECK(npy_values<std::int64_t>(scratch / "out/conversation_id.npy", DType::i64) ==
          std::vector<std::int64_t>{0, 0, 1, 1});

    // The text summary names it on stderr; --strict refuses it, naming input, field and why.
    const auto text = run_cli({"pack", input, "-o", scratch / "ds2", "--quiet"});
    REQUIRE(text.exit_code == 0);
    CHECK(text.err.find("left out: " + input + ": [*].tags (") != std::string::npos);
    const auto strict = run_cli({"pack", input, "-o", scratch / "ds3", "--strict"});
    CHECK(strict.exit_code == 2);
    CHECK(strict.err.find(input + ": field '[*].tags': cannot be stored") != std::string::npos);
    CHECK_FALSE(fs::exists(scratch / "ds3/manifest.json"));
  }
}

TEST_CASE("--field keeps the columns it names and notes the others") {
  test_support::ScratchDir scratch;
  const std::string input = data_path("mapping/dialogue_fields.pt");
  const auto packed =
      run_cli({"pack", input, "-o", scratch / "ds", "--field", "label=[*].label", "--json"});
  REQUIRE_MESSAGE(packed.exit_code == 0, packed.out << packed.err);
  std::vector<std::string> not_selected;
  const auto result = json_of(packed);
  for (const auto& entry : result["not_selected"])
    not_selected.push_back(entry["field"].get<std::string>());
  CHECK(joined(not_selected) == "[*].id,[*].conversation_id,[*].turn,[*].meta.lang,[*].meta.score");
  const auto text = run_cli({"pack", input, "-o", scratch / "ds2", "--field", "label=[*].label"});
  REQUIRE(text.exit_code == 0);
  CHECK(text.err.find("note: --field keeps only the columns it names; not packed: " + input +
                      ": [*].id") != std::string::npos);
}

TEST_CASE("probe names the fields it leaves out") {
  const auto probed = run_cli({"probe", data_path("mapping/dialogue_fields.jsonl")});
  REQUIRE(probed.exit_code == 0);
  CHECK(probed.out.find("left out: [*].tags (") != std::string::npos);
  CHECK(probed.out.find("meta.lang") != std::string::npos);
  const auto json =
      json_of(run_cli({"probe", data_path("mapping/dialogue_fields.jsonl"), "--json"}))[0];
  REQUIRE(json["layout"]["left_out"].size() == 1);
  CHECK(json["layout"]["left_out"][0]["field"] == "[*].tags");
}

TEST_CASE("a mixed project: --input-map packs inputs of different layouts into one dataset") {
  test_support::ScratchDir scratch;
  // A dialogue file's questions and answers (the same file twice, mapped two ways), an embeddings
  // dict with its texts and an LLM cache, all into embedding + text.
  const std::string map = scratch / "project.json";
  {
    nlohmann::json project = {
        {"inputs",
         {{{"path", data_path("pt/dialogue_list.pt")},
           {"fields", {{"embedding", "[*].question_embedding"}, {"text", "[*].question"}}}},
          {{"path", data_path("pt/dialogue_list.pt")},
           {"fields", {{"embedding", "[*].answer_embedding"}, {"text", "[*].answer"}}}},
          {{"path", data_path("pt/embeddings_dict.pt")}},
          {{"path", data_path("pt/llm_cache.pt")}}}}};
    std::ofstream(map) << project.dump();
  }
  const auto packed = run_cli({"pack", "--input-map", map, "-o", scratch / "ds", "--json"});
  REQUIRE_MESSAGE(packed.exit_code == 0, packed.err);
  const auto result = json_of(packed);
  CHECK(result["rows"] == 3 + 3 + 4 + 3);
  // Each dialogue entry names what it left: the other side's question/answer and embedding.
  CAPTURE(result["not_selected"].dump());
  CHECK(result["not_selected"].size() >= 4);

  const auto inspected = json_of(run_cli({"inspect", scratch / "ds", "--json"}));
  std::vector<std::string> names;
  for (const auto& column : inspected["columns"])
    names.push_back(column["name"].get<std::string>());
  CHECK(joined(names) == "embedding,text,@source,@source_row");

  // @source says which entry of the map each row came from.
  REQUIRE(run_cli({"export", scratch / "ds", "--to", "npy", scratch / "out"}).exit_code == 0);
  CHECK(npy_values<std::int32_t>(scratch / "out/@source.npy", DType::i32) ==
        std::vector<std::int32_t>{0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3});
  CHECK(npy_values<std::int64_t>(scratch / "out/@source_row.npy", DType::i64) ==
        std::vector<std::int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 0, 1, 2});
}

TEST_CASE("--input-map: an input that lacks a column is named with the column and what to pass") {
  test_support::ScratchDir scratch;
  const std::string map = scratch / "project.json";
  std::ofstream(map) << nlohmann::json{{"inputs",
                                        {{{"path", data_path("pt/llm_cache.pt")}},
                                         {{"path", data_path("pt/embeddings.pt")}}}}}
                            .dump();
  const auto refused = run_cli({"pack", "--input-map", map, "-o", scratch / "ds"});
  CHECK(refused.exit_code == 2);
  CHECK_MESSAGE(refused.err.find("embeddings.pt (embeddings) has no column 'text', which ") !=
                    std::string::npos,
                refused.err);
  CHECK(refused.err.find("llm_cache.pt (llm-cache) has") != std::string::npos);
  CHECK(refused.err.find("its own fields in --input-map") != std::string::npos);
  CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);

  // "fill" gives the plain matrix the text column it lacks, the same text in every row.
  std::ofstream(scratch / "filled.json") << nlohmann::json{
      {"inputs",
       {{{"path", data_path("pt/llm_cache.pt")}},
        {{"path", data_path("pt/embeddings.pt")},
         {"fill", {{"text", "(no text)"}}}}}}}.dump();
  const auto filled =
      run_cli({"pack", "--input-map", scratch / "filled.json", "-o", scratch / "filled", "--json"});
  REQUIRE_MESSAGE(filled.exit_code == 0, filled.err);
  CHECK(json_of(filled)["rows"] == 3 + 5);
  REQUIRE(
      run_cli({"export", scratch / "filled", "--to", "npy", scratch / "filled-out"}).exit_code ==
      0);
  std::ifstream texts(scratch / "filled-out/text.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(texts, line);) lines.push_back(line);
  REQUIRE(lines.size() == 8);
  CHECK(lines[0] == "\"What is a GPU?\"");
  CHECK(std::all_of(lines.begin() + 3, lines.end(),
                    [](const std::string& line) { return line == "\"(no text)\""; }));
  // A fill of a column the input has is refused, naming the entry.
  std::ofstream(scratch / "refill.json")
      << R"([{"path": ")" << data_path("pt/llm_cache.pt") << R"(", "fill": {"text": ""}}])";
  const auto refill =
      run_cli({"pack", "--input-map", scratch / "refill.json", "-o", scratch / "r"});
  CHECK(refill.exit_code == 2);
  CHECK(refill.err.find("input 0 (") != std::string::npos);
  CHECK(refill.err.find("\"fill\" names column 'text', which the input has") != std::string::npos);

  // --field beside the map, and a map entry with an unknown key, are refused naming what to do.
  const auto both =
      run_cli({"pack", "--input-map", map, "--field", "embedding=.", "-o", scratch / "ds2"});
  CHECK(both.exit_code == 2);
  CHECK(both.err.find("--input-map entry") != std::string::npos);
  std::ofstream(scratch / "bad.json") << R"({"inputs": [{"path": "a.pt", "field": {}}]})";
  const auto bad = run_cli({"pack", "--input-map", scratch / "bad.json", "-o", scratch / "ds3"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("input 0 has \"field\"; an entry takes path, kind, fields, roles and fill") !=
        std::string::npos);
}

TEST_CASE("an f64 embedding keeps f64 through pack, inspect, verify, export and append") {
  test_support::ScratchDir scratch;
  // Values f32 cannot hold, all rows inside the default norm bounds.
  constexpr std::uint64_t kRows = 6, kDim = 5;
  std::vector<double> values(kRows * kDim);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 1.0 / 3 + static_cast<double>(i) / 7;
  auto save = [&](const std::string& path, DType dtype) {
    gpucache::write_npy(path, dtype, {kRows, kDim},
                        [&](std::span<std::byte> out, std::uint64_t first, std::uint64_t count) {
                          for (std::uint64_t i = 0; i < count * kDim; ++i) {
                            const double value = values[first * kDim + i];
                            const float single = static_cast<float>(value);
                            if (dtype == DType::f64)
                              std::memcpy(out.data() + 8 * i, &value, 8);
                            else
                              std::memcpy(out.data() + 4 * i, &single, 4);
                          }
                        });
  };
  save(scratch / "f64.npy", DType::f64);
  save(scratch / "f32.npy", DType::f32);
  const std::string dataset = scratch / "ds";
  const auto packed = run_cli({"pack", scratch / "f64.npy", "-o", dataset, "--json"});
  REQUIRE_MESSAGE(packed.exit_code == 0, packed.err);
  CHECK(json_of(packed)["rows"] == kRows);
  CHECK(json_of(packed)["stored_as"].empty());
  CHECK(packed.err.find("stored as") == std::string::npos);
  const auto inspected = json_of(run_cli({"inspect", dataset, "--json"}));
  CHECK(inspected["columns"][0]["name"] == "embedding");
  CHECK(inspected["columns"][0]["dtype"] == "f64");
  const auto verified = run_cli({"verify", dataset, "--deep", "--json"});
  CHECK_MESSAGE(verified.exit_code == 0, verified.out);
  REQUIRE(run_cli({"export", dataset, "--to", "npy", scratch / "npy"}).exit_code == 0);
  CHECK(npy_values<double>(scratch / "npy/embedding.npy", DType::f64) == values);
  REQUIRE(
      run_cli({"export", dataset, "--to", "safetensors", scratch / "ds.safetensors"}).exit_code ==
      0);

  // Asked for f32: converted, and reported as not exact.
  const auto converted = run_cli(
      {"pack", scratch / "f64.npy", "-o", scratch / "f32ds", "--dtype", "embedding=f32", "--json"});
  REQUIRE_MESSAGE(converted.exit_code == 0, converted.err);
  const auto stored_as = json_of(converted)["stored_as"];
  REQUIRE(stored_as.size() == 1);
  CHECK(stored_as[0] == nlohmann::json{{"column", "embedding"},
                                       {"from", "f64"},
                                       {"to", "f32"},
                                       {"asked", true},
                                       {"exact", false}});
  CHECK(json_of(run_cli({"inspect", scratch / "f32ds", "--json"}))["columns"][0]["dtype"] == "f32");

  // --append: f64 rows join; f32 rows are refused, naming the column and both dtypes.
  const auto appended = run_cli({"pack", scratch / "f64.npy", "--append", dataset, "--json"});
  REQUIRE_MESSAGE(appended.exit_code == 0, appended.err);
  CHECK(json_of(run_cli({"inspect", dataset, "--json"}))["rows"] == 2 * kRows);
  const auto refused = run_cli({"pack", scratch / "f32.npy", "--append", dataset});
  CHECK(refused.exit_code == 2);
  CHECK_MESSAGE(refused.err.find("column 'embedding'") != std::string::npos, refused.err);
  CHECK(refused.err.find("is stored as f32 but in " + dataset + " as f64") != std::string::npos);
  CHECK(refused.err.find("give the rows as f64 values") != std::string::npos);
  CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
  CHECK(run_cli({"verify", dataset, "--deep"}).exit_code == 0);
  // Packed together, the f32 rows beside f64 ones are refused unless --dtype says.
  const auto mixed =
      run_cli({"pack", scratch / "f64.npy", scratch / "f32.npy", "-o", scratch / "mixed"});
  CHECK(mixed.exit_code == 2);
  CHECK(mixed.err.find("f32.npy") != std::string::npos);
  CHECK(mixed.err.find("column 'embedding'") != std::string::npos);
  CHECK(run_cli({"pack", scratch / "f64.npy", scratch / "f32.npy", "-o", scratch / "mixed",
                 "--dtype", "f32", "-q"})
            .exit_code == 0);
  // An f32 input first and an f64 one after: rounding the f64 rows is refused unless asked.
  const auto rounded =
      run_cli({"pack", scratch / "f32.npy", scratch / "f64.npy", "-o", scratch / "rounded"});
  CHECK(rounded.exit_code == 2);
  CHECK_MESSAGE(rounded.err.find("f64.npy: column 'embedding': holds f64 values, which storing "
                                 "as the first input's f32 would round; pass --dtype "
                                 "embedding=f32") != std::string::npos,
                rounded.err);
}

namespace {

// A mixed project of two entries mapped to embedding + text: the dialogue file's questions, and
// the second entry's side (answers, or questions again); `roles` in both entries when given.
std::string dialogue_map(const std::string& path, const std::string& second_side,
                         const nlohmann::json& roles = nullptr) {
  auto entry = [&](const std::string& side) {
    nlohmann::json mapped = {
        {"path", data_path("pt/dialogue_list.pt")},
        {"fields", {{"embedding", "[*]." + side + "_embedding"}, {"text", "[*]." + side}}}};
    if (!roles.is_null()) mapped["roles"] = roles;
    return mapped;
  };
  std::ofstream(path) << nlohmann::json{{"inputs", {entry("question"), entry(second_side)}}}.dump();
  return path;
}

}  // namespace

TEST_CASE("--input-map: --resume refuses another map naming it; --append compares what is stored") {
  test_support::ScratchDir scratch;
  const std::string dataset = scratch / "ds";
  const auto answers = dialogue_map(scratch / "answers.json", "answer");
  REQUIRE(run_cli({"pack", "--input-map", answers, "-o", dataset, "-q"}).exit_code == 0);
  const auto options = test_support::manifest_json(dataset)["options"];
  REQUIRE(options.contains("input_map"));
  CHECK(options["input_map"][1]["fields"]["embedding"] == "[*].answer_embedding");

  // An interrupted pack of the answers map (its recorded options, no manifest yet), resumed with
  // the questions twice: refused, naming the map and both values.
  fs::remove(dataset + "/manifest.json");
  std::ofstream(dataset + "/pack-state.json") << nlohmann::json{{"options", options}}.dump(2);
  const auto questions = dialogue_map(scratch / "questions.json", "question");
  const auto refused = run_cli({"pack", "--input-map", questions, "-o", dataset, "--resume"});
  CHECK(refused.exit_code == 2);
  CHECK_MESSAGE(refused.err.find("option input_map is ") != std::string::npos, refused.err);
  CHECK(refused.err.find("[*].answer_embedding") != std::string::npos);
  CHECK(refused.err.find("in the interrupted pack but ") != std::string::npos);
  CHECK(refused.err.find("[*].question_embedding") != std::string::npos);
  // The same map is refused for what does differ (the fake state has no inputs), not the map.
  const auto same = run_cli({"pack", "--input-map", answers, "-o", dataset, "--resume"});
  CHECK(same.exit_code == 2);
  CHECK(same.err.find("input_map") == std::string::npos);

  // --append compares the stored columns, roles and checks, not the map's text: the questions
  // map stores the same columns and joins; a map that makes the embedding a tensor does not.
  REQUIRE(run_cli({"pack", "--input-map", answers, "-o", dataset, "--force", "-q"}).exit_code == 0);
  const auto joined_rows = run_cli({"pack", "--input-map", questions, "--append", dataset, "-q"});
  CHECK_MESSAGE(joined_rows.exit_code == 0, joined_rows.err);
  CHECK(test_support::manifest_json(dataset)["rows"] == 12);
  const auto tensor = dialogue_map(scratch / "tensor.json", "answer", {{"embedding", "tensor"}});
  const auto other = run_cli({"pack", "--input-map", tensor, "--append", dataset});
  CHECK(other.exit_code == 2);
  CHECK_MESSAGE(other.err.find("embedding") != std::string::npos, other.err);
  CHECK(test_support::manifest_json(dataset)["rows"] == 12);
  CHECK(run_cli({"verify", dataset}).exit_code == 0);
}
