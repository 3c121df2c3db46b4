#include <doctest/doctest.h>

#include <sys/mman.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "gpucache/probe.hpp"
#include "value_builders.hpp"

using namespace gpucache;
using namespace gpucache::test;

namespace {

std::size_t line_count(const std::string& text) {
  return std::count(text.begin(), text.end(), '\n');
}

Value dialogue(std::size_t rows, std::int64_t odd_row = -1) {
  std::vector<Value> items;
  items.reserve(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    const std::int64_t dim = static_cast<std::int64_t>(i) == odd_row ? 8 : 4;
    items.push_back(dict({{"question", str("question " + std::to_string(i))},
                          {"answer", str("answer " + std::to_string(i))},
                          {"question_embedding", f32_iota({dim})},
                          {"answer_embedding", f32_iota({dim})}}));
  }
  return list(std::move(items));
}

// A tensor whose bytes cannot be read: any access faults, so a passing test proves that no
// tensor data was touched.
struct UnreadableStorage {
  std::size_t size;
  void* memory;
  explicit UnreadableStorage(std::size_t bytes) : size(bytes) {
    memory = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(memory != MAP_FAILED);
  }
  ~UnreadableStorage() { munmap(memory, size); }
  Value tensor(std::vector<std::int64_t> shape) const {
    auto storage = std::make_shared<Storage>();
    storage->bytes = {static_cast<const std::byte*>(memory), size};
    auto result = std::make_shared<Tensor>();
    result->dtype = DType::f32;
    result->strides.resize(shape.size());
    std::int64_t stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
      result->strides[i] = stride;
      stride *= shape[i];
    }
    result->shape = std::move(shape);
    result->storage = std::move(storage);
    return Value(result);
  }
};

}  // namespace

TEST_CASE("a long homogeneous list is summarised in a few lines, with the mapping") {
  const std::string text = probe_text(dialogue(100000), "dialogue.pt");
  CAPTURE(text);
  CHECK(line_count(text) < 20);
  CHECK(text.find("dialogue.pt: list[100000] of dicts with the same keys and types; [0]:\n"
                  "  question: str \"question 0\"\n") == 0);
  CHECK(text.find("  question_embedding: tensor f32 [4]\n") != std::string::npos);
  CHECK(text.find("layout: dialogue, 100000 rows\n") != std::string::npos);
  CHECK(text.find("  question_embedding  embedding f32 [4] from [*].question_embedding\n") !=
        std::string::npos);
  CHECK(text.find("  answer              text") != std::string::npos);
  CHECK(text.find("flags: --kind dialogue --field 'question_embedding=[*].question_embedding'") !=
        std::string::npos);
}

TEST_CASE("the JSON rendering has the same content and parses") {
  const auto json = nlohmann::json::parse(probe_json(dialogue(1000), "dialogue.pt"));
  CHECK(json["file"] == "dialogue.pt");
  CHECK(json["tree"]["type"] == "list");
  CHECK(json["tree"]["length"] == 1000);
  CHECK(json["tree"]["element"]["type"] == "dict");
  CHECK(json["tree"]["element"]["items"]["answer_embedding"]["shape"] == std::vector<int>{4});
  CHECK(json["layout"]["kind"] == "dialogue");
  CHECK(json["layout"]["rows"] == 1000);
  CHECK(json["layout"]["columns"][0]["name"] == "question_embedding");
  CHECK(json["layout"]["columns"][0]["dim"] == 4);
  CHECK(json["layout"]["columns"][2]["kind"] == "text");
  CHECK(json["layout"]["fields"][3] ==
        nlohmann::json{{"column", "answer"}, {"path", "[*].answer"}});
  CHECK(json["layout_error"].is_null());
}

TEST_CASE("a row with a different shape shows up as its own variant, and the mapping refuses it") {
  const Value root = dialogue(1000, 500);
  const std::string text = probe_text(root, "odd.pt");
  CAPTURE(text);
  CHECK(text.find("odd.pt: list[1000] of 2 different structures:\n  999 x dict{") == 0);
  CHECK(text.find("question_embedding: tensor f32 [8], answer_embedding: tensor f32 [8]} (first at "
                  "[500])") != std::string::npos);
  CHECK(text.find("layout: none\n  column question_embedding (path '[*].question_embedding'): "
                  "row 500 has 8 values") != std::string::npos);

  const auto json = nlohmann::json::parse(probe_json(root, "odd.pt"));
  CHECK(json["tree"]["variant_count"] == 2);
  CHECK(json["tree"]["variants"][1]["count"] == 1);
  CHECK(json["tree"]["variants"][1]["first_index"] == 500);
  CHECK(json["layout"].is_null());
  CHECK(json["layout_error"].get<std::string>().find("row 500 has 8 values") != std::string::npos);
}

TEST_CASE("string lists are counted and sampled; big text -> tensor dicts are summarised") {
  std::vector<Value> texts;
  std::vector<std::pair<std::string, Value>> cache;
  for (int i = 0; i < 500; ++i) {
    texts.push_back(str("text number " + std::to_string(i)));
    cache.emplace_back("prompt " + std::to_string(i), f32_iota({16}));
  }
  const Value root = dict({{"texts", list(texts)}, {"cache", dict(cache)}, {"note", str("a\nb")}});
  const std::string text = probe_text(root, "mix.pt");
  CAPTURE(text);
  CHECK(text.find("  texts: list[500] of str, e.g. \"text number 0\", \"text number 1\", \"text "
                  "number 2\"\n") != std::string::npos);
  CHECK(text.find(
            "  cache: dict[500] of str -> tensor f32 [16], keys e.g. \"prompt 0\", \"prompt 1\"") !=
        std::string::npos);
  CHECK(text.find("  note: str \"a\\nb\"\n") != std::string::npos);
  CHECK(line_count(text) < 20);
  // Two candidate datasets (the text list with no vectors is not one; the cache is).
  CHECK(text.find("layout: llm-cache, 500 rows") != std::string::npos);
  CHECK(text.find("from cache.@keys") != std::string::npos);

  const auto json = nlohmann::json::parse(probe_json(root, "mix.pt"));
  CHECK(json["tree"]["items"]["texts"]["sample"].size() == 3);
  CHECK(json["tree"]["items"]["cache"]["sample"][0] == "prompt 0");
  CHECK(json["tree"]["items"]["cache"]["element"]["dtype"] == "f32");
}

TEST_CASE("probe shows why no mapping was found, and follows --kind/--field") {
  const Value root = dict({{"a", f32_iota({3, 2})}, {"b", f32_iota({3, 2})}});
  const std::string text = probe_text(root, "two.pt");
  CHECK(text.find("layout: none\n  the root holds 2 blocks of vectors") != std::string::npos);
  // The choices are on the error's one line.
  CHECK(text.find(" To choose, pass one of: --kind embeddings --field embedding=a | ") !=
        std::string::npos);

  ProbeOptions options;
  options.fields = {{"embedding", "b"}};
  CHECK(probe_text(root, "two.pt", options).find("  embedding  embedding f32 [2] from b\n") !=
        std::string::npos);
  options.kind = SourceKind::dialogue;
  const auto json = nlohmann::json::parse(probe_json(root, "two.pt", options));
  CHECK(json["layout_error"].get<std::string>().find("--field question_embedding=PATH") !=
        std::string::npos);
}

TEST_CASE("probe never reads tensor data") {
  UnreadableStorage storage(1000 * 384 * 4);
  const Value root = dict({{"embeddings", storage.tensor({1000, 384})}, {"meta", str("x")}});
  const std::string text = probe_text(root, "e.pt");
  CHECK(text.find("  embeddings: tensor f32 [1000, 384]\n") != std::string::npos);
  CHECK(text.find("layout: embeddings, 1000 rows") != std::string::npos);
  CHECK(nlohmann::json::parse(probe_json(root, "e.pt"))["layout"]["columns"][0]["dim"] == 384);
}

TEST_CASE("deep, cyclic, small mixed and odd inputs render without trouble") {
  auto cyclic = std::make_shared<List>();
  cyclic->items.push_back(Value(cyclic));
  cyclic->items.push_back(Value(std::int64_t{1}));
  const std::string text = probe_text(Value(cyclic), "cycle.pt");
  CHECK(text.find("nested too deep to show") != std::string::npos);
  CHECK(nlohmann::json::parse(probe_json(Value(cyclic), "cycle.pt"))["tree"]["type"] == "list");
  cyclic->items.clear();

  const Value mixed = list({Value(std::int64_t{3}), Value(2.5), Value(), Value(true), str("s"),
                            list({}), dict({}), Value(2.0)});
  const std::string small = probe_text(mixed, "m.pt");
  CAPTURE(small);
  CHECK(small.find("m.pt: list[8]\n  [0]: int 3\n  [1]: float 2.5\n  [2]: None\n  [3]: bool True\n"
                   "  [4]: str \"s\"\n  [5]: list[0]\n  [6]: dict (empty)\n  [7]: float 2.0\n") ==
        0);
  CHECK(probe_text(Value(0.1), "f.pt").find("f.pt: float 0.1\n") == 0);

  // Keys and strings that are not valid UTF-8 still give valid JSON.
  const Value odd = dict({{std::string("bad\xff key"), str("\xc3")}, {"", str("")}});
  const auto json = nlohmann::json::parse(probe_json(odd, "odd.pt"));
  CHECK(json["tree"]["length"] == 2);
  CHECK(probe_text(odd, "odd.pt").find("  \"\": str \"\"\n") != std::string::npos);
}
