#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "gpucache/column_name.hpp"
#include "gpucache/error.hpp"
#include "gpucache/schema.hpp"
#include "schema_path.hpp"
#include "value_builders.hpp"

using namespace gpucache;
using namespace gpucache::test;

namespace {

std::vector<float> read_f32(const InputColumn& column, std::uint64_t first = 0,
                            std::uint64_t count = std::numeric_limits<std::uint64_t>::max()) {
  if (count == std::numeric_limits<std::uint64_t>::max()) count = column.rows - first;
  std::vector<float> out(count * column.dim());
  read_rows_as(column, first, count, DType::f32, std::as_writable_bytes(std::span(out)));
  return out;
}

std::vector<float> iota(std::size_t count, float start) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = start + static_cast<float>(i);
  return values;
}

std::vector<std::string> column_names(const SourceMapping& mapping) {
  std::vector<std::string> names;
  for (const auto& column : mapping.columns) names.push_back(column.name);
  return names;
}

std::string mapping_error(const Value& root, std::optional<SourceKind> kind = std::nullopt,
                          const std::vector<FieldSpec>& fields = {}) {
  try {
    map_source(root, "in.pt", kind, fields);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

Value dialogue_rows(std::size_t count, std::int64_t dim) {
  std::vector<Value> rows;
  for (std::size_t i = 0; i < count; ++i) {
    const float base = static_cast<float>(i * 100);
    rows.push_back(dict({{"question", str("q" + std::to_string(i))},
                         {"answer", str("a" + std::to_string(i))},
                         {"question_embedding", f32_iota({dim}, base)},
                         {"answer_embedding", f32_iota({1, dim}, base + 50)}}));
  }
  return list(std::move(rows));
}

}  // namespace

TEST_CASE("a list of dialogue dicts maps to four columns, read row by row") {
  const Value root = dialogue_rows(3, 4);
  const SourceMapping mapping = map_source(root, "dialogue.pt");
  CHECK(mapping.kind == SourceKind::dialogue);
  CHECK(mapping.rows == 3);
  CHECK(column_names(mapping) ==
        std::vector<std::string>{"question_embedding", "answer_embedding", "question", "answer"});
  const InputColumn& question = *mapping.find("question_embedding");
  CHECK(question.kind == ColumnKind::tensor);
  CHECK(question.dim() == 4);
  CHECK(question.path == "[*].question_embedding");
  CHECK(question.row_pointers != nullptr);  // rows lie apart, a tensor each
  CHECK(read_f32(question, 1, 2) == std::vector<float>{100, 101, 102, 103, 200, 201, 202, 203});
  // [1, D] rows are accepted as [D].
  CHECK(read_f32(*mapping.find("answer_embedding"), 2, 1) ==
        std::vector<float>{250, 251, 252, 253});
  CHECK(read_text(*mapping.find("answer"), 2) == "a2");
  CHECK(mapping.fields == std::vector<FieldSpec>{{"question_embedding", "[*].question_embedding"},
                                                 {"answer_embedding", "[*].answer_embedding"},
                                                 {"question", "[*].question"},
                                                 {"answer", "[*].answer"}});
  CHECK(mapping.explanation.find("a list of 3 dicts") != std::string::npos);
}

TEST_CASE("a dict of parallel lists and tensors maps to dialogue, converting f16 to f32") {
  // f16 bit patterns for 1.0, -2.0, 0.5, 65504 (max), 2^-24 (smallest subnormal), -0.
  const std::vector<std::uint16_t> halves{0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x8000};
  std::vector<Value> answer_rows{f32({3}, {1, 2, 3}), f32({3}, {4, 5, 6})};
  const Value root = dict({{"questions", list({str("first?"), str("second?")})},
                           {"answers", list({str("one"), str("two")})},
                           {"question_embeddings", tensor(DType::f16, {2, 3}, bytes_of(halves))},
                           {"answer_embeddings", list(answer_rows)},
                           {"created", str("2026-01-01")}});
  const SourceMapping mapping = map_source(root, "parallel.pt");
  CHECK(mapping.kind == SourceKind::dialogue);
  CHECK(mapping.rows == 2);
  const InputColumn& question = *mapping.find("question_embedding");
  CHECK(question.dtype == DType::f16);
  CHECK(question.row_pointers == nullptr);  // one matrix holds every row
  const auto values = read_f32(question);
  CHECK(values[0] == 1.0f);
  CHECK(values[1] == -2.0f);
  CHECK(values[2] == 0.5f);
  CHECK(values[3] == 65504.0f);
  CHECK(values[4] == std::ldexp(1.0f, -24));
  CHECK(std::signbit(values[5]));
  CHECK(read_f32(*mapping.find("answer_embedding")) == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(read_text(*mapping.find("question"), 1) == "second?");
}

TEST_CASE("a dict text -> vector is an LLM cache keyed by its texts") {
  const Value root = dict({{"hello", f32({2}, {1, 2})}, {"world", f32({1, 2}, {3, 4})}});
  const SourceMapping mapping = map_source(root, "llm_cache.pt");
  CHECK(mapping.kind == SourceKind::llm_cache);
  CHECK(column_names(mapping) == std::vector<std::string>{"text", "embedding"});
  CHECK(mapping.find("text")->path == "@keys");
  CHECK(mapping.find("embedding")->path == "[*]");
  CHECK(read_text(*mapping.find("text"), 1) == "world");
  CHECK(read_f32(*mapping.find("embedding")) == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("{texts, embeddings}: one vector per text is an LLM cache, a matrix is embeddings") {
  const Value per_row = dict({{"texts", list({str("a"), str("b")})},
                              {"embeddings", list({f32({2}, {1, 2}), f32({2}, {3, 4})})}});
  CHECK(map_source(per_row, "c.pt").kind == SourceKind::llm_cache);

  const Value matrix =
      dict({{"texts", list({str("a"), str("b")})}, {"embeddings", f32_iota({2, 2})}});
  const SourceMapping embeddings = map_source(matrix, "e.pt");
  CHECK(embeddings.kind == SourceKind::embeddings);
  CHECK(column_names(embeddings) == std::vector<std::string>{"embedding", "text"});

  // Same columns, so --kind llm-cache just relabels and says so.
  const SourceMapping relabelled = map_source(matrix, "e.pt", SourceKind::llm_cache);
  CHECK(relabelled.kind == SourceKind::llm_cache);
  CHECK(column_names(relabelled) == std::vector<std::string>{"text", "embedding"});
  CHECK(relabelled.explanation.find("Labelled llm-cache as asked") != std::string::npos);
}

TEST_CASE("a bare [N, D] tensor is embeddings; bf16 and f64 convert to f32") {
  const std::vector<std::uint16_t> bf16{0x3f80, 0xc040, 0x0000, 0x4120};  // 1, -3, 0, 10
  const SourceMapping mapping = map_source(tensor(DType::bf16, {2, 2}, bytes_of(bf16)), "m.pt");
  CHECK(mapping.kind == SourceKind::embeddings);
  CHECK(mapping.find("embedding")->path == ".");
  CHECK(read_f32(*mapping.find("embedding")) == std::vector<float>{1, -3, 0, 10});

  const std::vector<double> doubles{0.1, -1e-3, 3.0, 1e30};
  const SourceMapping wide = map_source(tensor(DType::f64, {2, 2}, bytes_of(doubles)), "m.pt");
  CHECK(read_f32(*wide.find("embedding")) ==
        std::vector<float>{0.1f, -1e-3f, 3.0f, static_cast<float>(1e30)});
}

TEST_CASE("a dict holding one 2-D float tensor under any key, nested or not, is embeddings") {
  const Value flat =
      dict({{"vectors", f32_iota({3, 2})},
            {"ids", tensor(DType::i64, {3, 1}, bytes_of(std::vector<std::int64_t>{1, 2, 3}))},
            {"model", str("minilm")}});
  const SourceMapping mapping = map_source(flat, "flat.pt");
  CHECK(mapping.kind == SourceKind::embeddings);
  // The other array with the same rows comes along as an extra tensor column, named after its
  // key; the string is metadata.
  CHECK(column_names(mapping) == std::vector<std::string>{"embedding", "ids"});
  CHECK(mapping.find("embedding")->path == "vectors");
  CHECK(mapping.find("embedding")->role == ColumnRole::embedding);
  CHECK(mapping.find("ids")->role == ColumnRole::tensor);
  CHECK(mapping.find("ids")->row_shape == std::vector<std::uint64_t>{1});

  const Value nested =
      dict({{"meta", dict({{"n", Value(std::int64_t{3})}})},
            {"payload",
             dict({{"x", f32_iota({3, 2})}, {"labels", list({str("a"), str("b"), str("c")})}})}});
  const SourceMapping inner = map_source(nested, "nested.pt");
  // A lone block under a key that names no standard column keeps the key's name (names are the
  // user's, issue #27) and is the embedding by role.
  CHECK(inner.find("embedding") == nullptr);
  REQUIRE(inner.find("x") != nullptr);
  CHECK(inner.find("x")->path == "payload.x");
  CHECK(inner.find("x")->role == ColumnRole::embedding);
  // The only text list of matching length comes along as the text column, under its own name.
  REQUIRE(inner.find("labels") != nullptr);
  CHECK(inner.find("labels")->path == "payload.labels");
  CHECK(inner.find("labels")->role == ColumnRole::text);
  CHECK(read_text(*inner.find("labels"), 2) == "c");
}

TEST_CASE("[N, 1, D] tensors and strided views are read row-major") {
  Value transposed = f32_iota({3, 2});  // storage 0..5; viewed as its transpose [2, 3]
  auto& view = *std::get<std::shared_ptr<Tensor>>(transposed.data);
  view.shape = {2, 3};
  view.strides = {1, 2};
  const SourceMapping strided = map_source(dict({{"embeddings", transposed}}), "s.pt");
  CHECK(read_f32(*strided.find("embedding")) == std::vector<float>{0, 2, 4, 1, 3, 5});
  CHECK(read_f32(*strided.find("embedding"), 1, 1) == std::vector<float>{1, 3, 5});

  const SourceMapping middle = map_source(dict({{"embeddings", f32_iota({2, 1, 3})}}), "m.pt");
  CHECK(middle.find("embedding")->dim() == 3);
  CHECK(read_f32(*middle.find("embedding"), 1, 1) == std::vector<float>{3, 4, 5});
}

TEST_CASE("two candidate tensors are ambiguous: the error names both and gives the flags") {
  const Value root = dict({{"a", f32_iota({4, 2})}, {"b", f32_iota({4, 2})}});
  const std::string message = mapping_error(root);
  CAPTURE(message);
  CHECK(message.find("in.pt: layout: the root holds 2 blocks of vectors") == 0);
  CHECK(message.find("a (tensor f32 [4, 2]), b (tensor f32 [4, 2])") != std::string::npos);
  CHECK(message.find("--kind embeddings --field embedding=a") != std::string::npos);
  CHECK(message.find("--kind embeddings --field embedding=b") != std::string::npos);
  CHECK(message.find("--kind dialogue --field question_embedding=a --field answer_embedding=b") !=
        std::string::npos);

  const SourceMapping chosen = map_source(root, "in.pt", std::nullopt, {{"embedding", "b"}});
  CHECK(chosen.kind == SourceKind::embeddings);
  CHECK(chosen.find("embedding")->path == "b");
  CHECK(chosen.explanation.find("Columns embedding from --field") == 0);

  const SourceMapping dialogue =
      map_source(root, "in.pt", SourceKind::dialogue,
                 {{"question_embedding", "a"}, {"answer_embedding", "b"}});
  CHECK(dialogue.kind == SourceKind::dialogue);
  CHECK(dialogue.rows == 4);
}

TEST_CASE("rows of dicts with unknown vector keys: error with [*] flags, then --field maps them") {
  std::vector<Value> rows;
  for (int i = 0; i < 3; ++i)
    rows.push_back(dict({{"q_text", str("q")},
                         {"qv", f32_iota({2}, i * 10.0f)},
                         {"av", f32_iota({2}, i * 10.0f + 5)},
                         {"label", Value(std::int64_t{i})}}));
  const Value root = dict({{"rows", list(rows)}, {"version", Value(std::int64_t{2})}});
  const std::string message = mapping_error(root);
  CAPTURE(message);
  CHECK(message.find("2 of those keys hold vectors") != std::string::npos);
  CHECK(message.find("--kind dialogue --field 'question_embedding=rows[*].qv' --field "
                     "'answer_embedding=rows[*].av'") != std::string::npos);

  const SourceMapping mapping = map_source(
      root, "in.pt", std::nullopt,
      {parse_field_spec("question_embedding=rows[*].qv"),
       parse_field_spec("answer_embedding=rows[*].av"), parse_field_spec("question=rows[*].q_text"),
       parse_field_spec("label=rows[*].label")});
  CHECK(mapping.kind == SourceKind::dialogue);
  CHECK(column_names(mapping) ==
        std::vector<std::string>{"question_embedding", "answer_embedding", "question", "label"});
  CHECK(read_f32(*mapping.find("answer_embedding"), 2, 1) == std::vector<float>{25, 26});
  // An extra integer column reads in its own dtype, and refuses f32.
  const InputColumn& label = *mapping.find("label");
  CHECK(label.dtype == DType::i64);
  CHECK(label.dim() == 1);
  std::vector<std::int64_t> labels(3);
  read_rows_as(label, 0, 3, DType::i64, std::as_writable_bytes(std::span(labels)));
  CHECK(labels == std::vector<std::int64_t>{0, 1, 2});
  std::vector<float> wrong(3);
  CHECK_THROWS_WITH(read_rows_as(label, 0, 3, DType::f32, std::as_writable_bytes(std::span(wrong))),
                    doctest::Contains("cannot be read as f32: it holds i64, readable as itself"));
}

TEST_CASE("field paths: keys, indexes, one wildcard, @keys, quoted keys") {
  const Value inner = dict({{"c", f32({2}, {1, 2})}});
  const Value root = dict({{"a", dict({{"b", list({inner, dict({{"c", f32({2}, {3, 4})}})})}})},
                           {"odd.key", list({str("x"), str("y")})},
                           {"m", dict({{"p", f32({2}, {0, 0})}, {"q", f32({2}, {0, 0})}})},
                           {"t", f32_iota({2, 2})}});
  auto column = [&](const std::string& path) {
    return std::make_shared<InputColumn>(
        *map_source(root, "p.pt", SourceKind::embeddings, {{"embedding", "t"}, {"extra", path}})
             .find("extra"));
  };
  CHECK(read_f32(*map_source(root, "p.pt", std::nullopt, {{"embedding", "a.b[*].c"}})
                      .find("embedding")) == std::vector<float>{1, 2, 3, 4});
  CHECK(read_text(*column("[\"odd.key\"]"), 1) == "y");
  CHECK(read_text(*column("m.@keys"), 0) == "p");
  CHECK(column("m[*]")->rows == 2);
  CHECK(column("a.b[1].c")->rows == 2);  // a 1-D tensor: one value per row
  CHECK(column("a.b[1].c")->dim() == 1);

  using detail::format_path;
  using detail::parse_path;
  for (const std::string path : {".", "t", "a.b[*].c", "[0]", "[*].q_emb", "[\"odd.key\"][3]",
                                 "m.@keys", "[\"@x\"]", "a[\"\\\"q\\\\\"]"}) {
    CAPTURE(path);
    CHECK(format_path(parse_path(path)) == path);
  }
  CHECK(format_path(parse_path("")) == ".");
  CHECK(format_path(parse_path(".a.b")) == "a.b");
  for (const std::string bad : {"a..b", "a[", "a[x]", "[*][*]", "a.@keys.b", "[*].@keys", "a[0]b",
                                "a]", "@values", "[\"open", "a.", "a[-1]"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_path(bad), UsageError);
  }
}

TEST_CASE("paths that do not exist say what does") {
  const Value root =
      dict({{"data", list({dict({{"q", f32({2}, {1, 2})}}), dict({{"r", f32({2}, {1, 2})}})})}});
  std::string message = mapping_error(root, SourceKind::embeddings, {{"embedding", "data[*].q"}});
  CHECK(message.find("'data[1]' has no key \"q\" (its keys: \"r\")") != std::string::npos);
  message = mapping_error(root, SourceKind::embeddings, {{"embedding", "data[5]"}});
  CHECK(message.find("'data' has 2 elements, no [5]") != std::string::npos);
  message = mapping_error(root, SourceKind::embeddings, {{"embedding", "nope"}});
  CHECK(message.find("the root has no key \"nope\" (its keys: \"data\")") != std::string::npos);
  message = mapping_error(root, SourceKind::embeddings, {{"embedding", "data"}});
  CHECK(message.find("row 0 is dict{q: tensor f32 [2]}") != std::string::npos);
  CHECK(message.find("end the path with [*].KEY") != std::string::npos);
}

TEST_CASE("per-row vectors of differing size or dtype are refused, naming the row") {
  Value rows = dialogue_rows(4, 3);
  auto& third =
      *std::get<std::shared_ptr<Dict>>(std::get<std::shared_ptr<List>>(rows.data)->items[2].data);
  third.items[2].second = f32_iota({5});
  CHECK(mapping_error(rows).find(
            "column question_embedding (path '[*].question_embedding'): row 2 has "
            "5 values (tensor f32 [5]) but row 0 has 3") != std::string::npos);
  third.items[2].second = tensor(DType::f16, {3}, std::vector<std::byte>(6));
  CHECK(mapping_error(rows).find("row 2 is f16 but row 0 is f32") != std::string::npos);
  third.items[2].second = f32_iota({2, 3});
  CHECK(mapping_error(rows).find("row 2 is tensor f32 [2, 3]; each row must be one vector") !=
        std::string::npos);
}

TEST_CASE("columns with different row counts are listed with their counts") {
  const Value root = dict({{"questions", list({str("a"), str("b"), str("c")})},
                           {"answers", list({str("a"), str("b")})},
                           {"question_embeddings", f32_iota({3, 2})},
                           {"answer_embeddings", f32_iota({3, 2})}});
  const std::string message = mapping_error(root);
  CAPTURE(message);
  CHECK(message.find("columns disagree on the number of rows:") != std::string::npos);
  CHECK(message.find("question: 3 rows (path 'questions')") != std::string::npos);
  CHECK(message.find("answer: 2 rows (path 'answers')") != std::string::npos);
}

TEST_CASE("--kind that does not fit the data says what was found and what to add") {
  const Value root = dict({{"embeddings", f32_iota({3, 2})}});
  const std::string message = mapping_error(root, SourceKind::dialogue);
  CAPTURE(message);
  CHECK(message.find("--kind dialogue was asked for, but the input looks like embeddings") !=
        std::string::npos);
  CHECK(message.find("--field question_embedding=PATH --field answer_embedding=PATH") !=
        std::string::npos);
  CHECK(mapping_error(root, SourceKind::llm_cache).find("--field text=PATH") != std::string::npos);
}

TEST_CASE("standard columns must have the right type") {
  const Value root = dict({{"texts", list({str("a"), str("b")})},
                           {"embeddings", f32_iota({2, 2})},
                           {"ids", tensor(DType::i32, {2, 2}, std::vector<std::byte>(16))}});
  CHECK(mapping_error(root, std::nullopt, {{"text", "embeddings"}})
            .find("must be text but holds numbers") != std::string::npos);
  CHECK(mapping_error(root, std::nullopt, {{"embedding", "texts"}})
            .find("must hold vectors but holds text") != std::string::npos);
  CHECK(mapping_error(root, std::nullopt, {{"embedding", "ids"}})
            .find("has dtype i32; embeddings must be") != std::string::npos);
}

TEST_CASE("rows of Python numbers are gathered into an owned tensor") {
  auto numbers = [](std::vector<double> values) {
    std::vector<Value> items;
    for (double value : values) items.push_back(Value(value));
    return list(items);
  };
  const Value root = list(
      {dict({{"text", str("a")}, {"embedding", numbers({0.5, 1.5})}}),
       dict({{"text", str("b")}, {"embedding", list({Value(std::int64_t{2}), Value(-1.0)})}})});
  const SourceMapping mapping = map_source(root, "py.pt");
  CHECK(mapping.kind == SourceKind::llm_cache);
  const InputColumn& embedding = *mapping.find("embedding");
  CHECK(embedding.dtype == DType::f64);
  CHECK(read_f32(embedding) == std::vector<float>{0.5, 1.5, 2, -1});
}

TEST_CASE("unrecognised inputs say what was found") {
  const Value root = dict({{"count", Value(std::int64_t{3})}, {"names", list({str("a")})}});
  const std::string message = mapping_error(root);
  CAPTURE(message);
  CHECK(message.find("no known layout (dialogue, embeddings, llm-cache or tensors): found "
                     "dict{count: int, names: "
                     "list[1] of str}") != std::string::npos);
  CHECK(message.find("No float tensor or list of numbers was found") != std::string::npos);
  CHECK(mapping_error(list({})).find("no known layout") != std::string::npos);
  CHECK(mapping_error(f32_iota({0, 4})).find("the columns have no rows") != std::string::npos);
}

TEST_CASE("a cyclic tree (possible from a pickle) ends in an error, not a hang") {
  auto cyclic = std::make_shared<List>();
  cyclic->items.push_back(Value(cyclic));
  const std::string message = mapping_error(Value(cyclic));
  CHECK(message.find("no known layout") != std::string::npos);
  cyclic->items.clear();  // break the cycle so the test does not leak
}

TEST_CASE("read_rows_as checks its arguments") {
  const SourceMapping mapping = map_source(f32_iota({3, 2}), "m.pt");
  const InputColumn& column = *mapping.find("embedding");
  std::vector<float> out(4);
  auto bytes = std::as_writable_bytes(std::span(out));
  CHECK_THROWS_WITH(read_rows_as(column, 2, 2, DType::f32, bytes),
                    doctest::Contains("out of range"));
  CHECK_THROWS_WITH(
      read_rows_as(column, std::numeric_limits<std::uint64_t>::max(), 2, DType::f32, bytes),
      doctest::Contains("out of range"));
  CHECK_THROWS_WITH(read_rows_as(column, 0, 1, DType::f32, bytes),
                    doctest::Contains("need 8 bytes"));
  CHECK_THROWS_WITH(read_rows_as(column, 0, 2, DType::f16, bytes.first(8)),
                    doctest::Contains("cannot be read as f16"));
  CHECK_THROWS_WITH(read_text(column, 0), doctest::Contains("is a numeric column"));
  read_rows_as(column, 1, 2, DType::f32, bytes);
  CHECK(out == std::vector<float>{2, 3, 4, 5});

  const SourceMapping texts = map_source(dict({{"a", f32({1}, {1})}}), "c.pt");
  CHECK_THROWS_WITH(read_rows_as(*texts.find("text"), 0, 1, DType::f32, bytes),
                    doctest::Contains("is a text column"));
  CHECK_THROWS_WITH(read_text(*texts.find("text"), 1), doctest::Contains("row 1 is out of range"));
}

TEST_CASE("big-endian and strided sources convert through the bounce buffer") {
  // 70000 f16 rows of one value each: more than one bounce-buffer chunk.
  const std::size_t rows = 70000;
  std::vector<std::uint16_t> halves(rows * 2);
  for (std::size_t i = 0; i < rows; ++i) {
    halves[2 * i] = 0x3c00;      // 1.0, the column read below
    halves[2 * i + 1] = 0x4000;  // 2.0
  }
  Value strided = tensor(DType::f16, {static_cast<std::int64_t>(rows), 2}, bytes_of(halves));
  auto& view = *std::get<std::shared_ptr<Tensor>>(strided.data);
  view.shape = {static_cast<std::int64_t>(rows), 1};  // every other element: column 0
  view.strides = {2, 1};
  const SourceMapping mapping = map_source(dict({{"embeddings", strided}}), "s.pt");
  const auto values = read_f32(*mapping.find("embedding"));
  CHECK(values.size() == rows);
  CHECK(std::all_of(values.begin(), values.end(), [](float value) { return value == 1.0f; }));

  const std::vector<std::uint8_t> big{0x3f, 0x80, 0, 0,
                                      0xc0, 0,    0, 0};  // 1.0, -2.0 in big-endian f32
  Value swapped = tensor(DType::f32, {1, 2}, bytes_of(big));
  std::get<std::shared_ptr<Tensor>>(swapped.data)->big_endian = true;
  CHECK(read_f32(*map_source(swapped, "b.pt").find("embedding")) == std::vector<float>{1, -2});
}

TEST_CASE("read_rows_as converts into an output buffer at any alignment") {
  const std::vector<std::uint16_t> halves{0x3c00, 0xc000, 0x3800, 0x4200};  // 1, -2, 0.5, 3
  const SourceMapping mapping = map_source(tensor(DType::f16, {2, 2}, bytes_of(halves)), "u.pt");
  std::vector<std::byte> buffer(4 * sizeof(float) + 1);
  const auto out = std::span(buffer).subspan(1);
  read_rows_as(*mapping.find("embedding"), 0, 2, DType::f32, out);
  std::vector<float> values(4);
  std::memcpy(values.data(), out.data(), out.size());
  CHECK(values == std::vector<float>{1, -2, 0.5, 3});
}

TEST_CASE("several inputs must agree on columns and dims, not on layout") {
  const SourceMapping a = map_source(dict({{"embeddings", f32_iota({2, 4})}}), "a.pt");
  const SourceMapping b = map_source(dict({{"embeddings", f32_iota({3, 8})}}), "b.pt");
  const SourceMapping c = map_source(dict({{"vectors", f32_iota({5, 4})}}), "c.pt");
  const std::vector<std::uint16_t> halves(8, 0x3c00);
  const SourceMapping half = map_source(tensor(DType::f16, {2, 4}, bytes_of(halves)), "h.pt");
  CHECK_NOTHROW(check_compatible({a, c, half}));  // f16 and f32 both become f32

  try {
    check_compatible({a, b, c});
    FAIL("expected an error");
  } catch (const Error& error) {
    const std::string message = error.what();
    CAPTURE(message);
    CHECK(message.find("disagree on column embedding (row shapes differ)") != std::string::npos);
    CHECK(message.find("a.pt: embedding f32 [4]") != std::string::npos);
    CHECK(message.find("b.pt: embedding f32 [8]") != std::string::npos);
    CHECK(message.find("c.pt: embedding f32 [4]") != std::string::npos);
  }
  const SourceMapping with_text =
      map_source(dict({{"embeddings", f32_iota({1, 4})}, {"texts", list({str("x")})}}), "t.pt");
  // The input that lacks the column is named, with the one that has it and what to pass, both
  // ways round.
  CHECK_THROWS_WITH(check_compatible({a, with_text}),
                    doctest::Contains("a.pt (embeddings) has no column 'text', which t.pt "
                                      "(embeddings) has; map a field of it to that column"));
  CHECK_THROWS_WITH(check_compatible({with_text, a}),
                    doctest::Contains("a.pt (embeddings) has no column 'text', which t.pt"));
  CHECK_THROWS_WITH(check_compatible({with_text, a}), doctest::Contains("fields={'text': PATH}"));
  const SourceMapping dialogue = map_source(dialogue_rows(2, 4), "d.pt");
  CHECK_THROWS_WITH(check_compatible({a, dialogue}),
                    doctest::Contains("d.pt (dialogue) has no column 'embedding', which a.pt "
                                      "(embeddings) has"));
  // Layouts may differ when the columns line up: a dialogue file's questions mapped to
  // embedding + text beside an LLM cache's text + embedding (in the other order).
  const SourceMapping questions =
      map_source(dialogue_rows(2, 4), "d.pt", SourceKind::embeddings,
                 {{"embedding", "[*].question_embedding"}, {"text", "[*].question"}});
  const SourceMapping cache =
      map_source(dict({{"first text", f32_iota({4})}, {"second text", f32_iota({4})}}), "llm.pt");
  REQUIRE(cache.kind == SourceKind::llm_cache);
  CHECK_NOTHROW(check_compatible({questions, cache}));
}

TEST_CASE("a dict in memory is an LLM cache by the .pt reader's rule, and only with tensors") {
  // Metadata-only tensors: the rule touches no data.
  auto vector = [](std::vector<std::int64_t> shape) {
    auto t = std::make_shared<Tensor>();
    t->dtype = DType::f32;
    t->shape = std::move(shape);
    t->strides.assign(t->shape.size(), 1);
    t->storage = std::make_shared<const Storage>(Storage::not_read(t->numel() * 4));
    return Value(t);
  };
  CHECK(memory_dict_is_llm_cache(dict({{"a question", vector({8})}, {"another", vector({8})}})));
  CHECK(memory_dict_is_llm_cache(dict({{"one row as [1, D]", vector({1, 8})}})));
  // Columns: an [N, D] matrix, a matrix beside a text list, an integer list, a list of numbers.
  CHECK_FALSE(memory_dict_is_llm_cache(dict({{"embedding", vector({5, 8})}})));
  CHECK_FALSE(memory_dict_is_llm_cache(
      dict({{"embedding", vector({2, 8})}, {"text", list({str("a"), str("b")})}})));
  CHECK_FALSE(memory_dict_is_llm_cache(dict({{"label", list({Value(std::int64_t{1})})}})));
  CHECK_FALSE(memory_dict_is_llm_cache(dict({{"a", vector({8})}, {"b", list({Value(1.5)})}})));
  CHECK_FALSE(memory_dict_is_llm_cache(list({vector({8})})));
}

TEST_CASE("kind names, --field parsing and flag formatting") {
  CHECK(parse_source_kind("llm-cache") == SourceKind::llm_cache);
  CHECK(parse_source_kind("llm_cache") == SourceKind::llm_cache);
  CHECK(parse_source_kind("dialog") == std::nullopt);
  CHECK(source_kind_name(SourceKind::embeddings) == "embeddings");
  CHECK(parse_field_spec("embedding=data.vectors") == FieldSpec{"embedding", "data.vectors"});
  CHECK(parse_field_spec("q_2=[*].a=b") == FieldSpec{"q_2", "[*].a=b"});
  CHECK_THROWS_AS(parse_field_spec("embedding"), UsageError);
  CHECK(parse_field_spec("Embedding=x").column == "Embedding");  // the user's case is kept
  CHECK_THROWS_AS(parse_field_spec("@Embedding=x"), UsageError);
  CHECK_THROWS_AS(parse_field_spec("=x"), UsageError);
  CHECK_THROWS_AS(parse_field_spec("e=a..b"), UsageError);
  CHECK(format_flags(SourceKind::llm_cache,
                     {{"text", "@keys"}, {"embedding", "[*]"}, {"n", "it's"}}) ==
        "--kind llm-cache --field text=@keys --field 'embedding=[*]' --field 'n=it'\\''s'");
  CHECK_THROWS_AS(
      map_source(f32_iota({2, 2}), "x", std::nullopt, {{"embedding", "."}, {"embedding", "."}}),
      UsageError);
}

TEST_CASE("a lone float vector field keeps its name, and --field naming its path maps it once") {
  std::vector<Value> rows;
  for (int i = 0; i < 3; ++i)
    rows.push_back(dict({{"features", f32_iota({4}, i * 10.0f)},
                         {"label", Value(std::int64_t{i})},
                         {"note", str("n" + std::to_string(i))}}));
  const Value root = list(rows);

  // Detected: the one vector field is the embedding by role and the one string field the text,
  // each under its own name.
  const SourceMapping detected = map_source(root, "rows.pt");
  CHECK(detected.kind == SourceKind::llm_cache);
  CHECK(column_names(detected) == std::vector<std::string>{"note", "features", "label"});
  CHECK(detected.find("features")->role == ColumnRole::embedding);
  // --role on its own name makes it a tensor (finite check only).
  const SourceMapping as_tensor =
      map_source(root, "rows.pt", std::nullopt, {}, {parse_role_spec("features=tensor")});
  CHECK(as_tensor.find("features")->role == ColumnRole::tensor);

  // --field features=[*].features names the detected column's data: one column, not a second
  // `embedding` copy of the same values (issue #27: it was stored twice).
  for (const std::string path : {"[*].features", "[*][\"features\"]"}) {
    CAPTURE(path);
    const SourceMapping named =
        map_source(root, "rows.pt", std::nullopt, {parse_field_spec("features=" + path)});
    // The layout's text column comes along (a standard column), under its own name too.
    CHECK(column_names(named) == std::vector<std::string>{"note", "features"});
    CHECK(named.find("features")->role == ColumnRole::embedding);
    CHECK(read_f32(*named.find("features"), 2, 1) == std::vector<float>{20, 21, 22, 23});
  }
  // Under another name too: `vec` is the embedding column, and nothing else holds its data.
  const SourceMapping renamed =
      map_source(root, "rows.pt", std::nullopt,
                 {parse_field_spec("vec=[*].features"), parse_field_spec("label=[*].label")});
  CHECK(column_names(renamed) == std::vector<std::string>{"note", "vec", "label"});
  CHECK(renamed.find("vec")->role == ColumnRole::embedding);
}

TEST_CASE("layout_role: the standard embedding columns are embeddings, nothing else has a role") {
  CHECK(layout_role(SourceKind::dialogue, "question_embedding") == ColumnRole::embedding);
  CHECK(layout_role(SourceKind::dialogue, "answer_embedding") == ColumnRole::embedding);
  CHECK(layout_role(SourceKind::embeddings, "embedding") == ColumnRole::embedding);
  CHECK(layout_role(SourceKind::llm_cache, "embedding") == ColumnRole::embedding);
  CHECK(layout_role(SourceKind::llm_cache, "text") == ColumnRole::text);
  CHECK(layout_role(SourceKind::tensors, "embedding") == std::nullopt);
  CHECK(layout_role(SourceKind::embeddings, "features") == std::nullopt);
}

TEST_CASE("column names of up to 255 bytes: --field accepts them, longer ones are refused") {
  const Value root = dict({{"x", f32_iota({3, 2})}});
  const std::string longest = std::string(255, 'a');
  const SourceMapping mapping =
      map_source(root, "in.pt", std::nullopt, {parse_field_spec(longest + "=x")});
  CHECK(column_names(mapping) == std::vector<std::string>{longest});
  CHECK_THROWS_WITH(parse_field_spec(std::string(256, 'a') + "=x"),
                    doctest::Contains("1 to 255 bytes"));
}

TEST_CASE("--field and --role take the user's names as written, split at the first '='") {
  const FieldSpec field = parse_field_spec("User Id.Größe=[*][\"a=b\"]");
  CHECK(field.column == "User Id.Größe");
  CHECK(field.path == "[*][\"a=b\"]");
  CHECK(parse_role_spec("Label=tensor").column == "Label");
  for (const std::string name :
       std::vector<std::string>{"@x", "a/b", ".", "..", "tab\there", "\xff"}) {
    CAPTURE(name);
    CHECK_THROWS_WITH(parse_field_spec(name + "=x"), doctest::Contains("not a legal column name"));
    CHECK_THROWS_WITH(parse_role_spec(name + "=tensor"),
                      doctest::Contains("not a legal column name"));
  }
}

TEST_CASE("a key \"a.b\" and a nested a -> b name one column: the later is left out, named") {
  std::vector<Value> rows;
  for (int i = 0; i < 2; ++i)
    rows.push_back(dict({{"features", f32_iota({4}, i * 10.0f)},
                         {"a.b", Value(std::int64_t{i})},
                         {"a", dict({{"b", Value(std::int64_t{i + 5})}})}}));
  const SourceMapping mapping = map_source(list(rows), "rows.pt");
  CHECK(column_names(mapping) == std::vector<std::string>{"features", "a.b"});
  CHECK(mapping.find("a.b")->path == "[*][\"a.b\"]");
  REQUIRE(mapping.left_out.size() == 1);
  CHECK(mapping.left_out[0].field == "[*].a.b");
  CHECK(mapping.left_out[0].reason.find("'a.b' is taken by another column") != std::string::npos);
  CHECK(mapping.renamed.empty());
}

TEST_CASE("the legal-name rule: only what a stored dataset cannot hold is changed") {
  for (const std::string name : {"Label", "user id", "Größe", "a.b", "x=y", "_", "...", "a@b"}) {
    CAPTURE(name);
    CHECK(valid_column_name(name));
    CHECK(legal_column_name(name) == name);
  }
  CHECK(legal_column_name("@x") == "_@x");
  CHECK(legal_column_name("a/b") == "a_b");
  CHECK(legal_column_name("tab\there") == "tab_here");
  CHECK(legal_column_name(".") == "_");
  CHECK(legal_column_name("..") == "__");
  CHECK(legal_column_name("bad\xff") == "bad_");
  CHECK(legal_column_name("") == "");
  // Cut at a character boundary: 127 two-byte characters and a third byte would split one.
  std::string umlauts;
  for (int i = 0; i < 130; ++i) umlauts += "ö";
  CHECK(legal_column_name(umlauts).size() == 254);
  CHECK(valid_column_name(legal_column_name(umlauts)));
  CHECK(legal_column_name(std::string(300, '/')) == std::string(255, '_'));
  CHECK_FALSE(valid_column_name(""));
  CHECK_FALSE(valid_column_name(std::string(256, 'a')));
}

TEST_CASE("a key that is no legal column name is made one, and the rename is reported") {
  const std::string long_key(300, 'k');  // cut to 255 bytes
  std::vector<Value> rows;
  for (int i = 0; i < 2; ++i)
    rows.push_back(dict({{"features", f32_iota({4}, i * 10.0f)},
                         {"Label", Value(std::int64_t{i})},
                         {"user id", Value(std::int64_t{i})},
                         {long_key, Value(std::int64_t{i})},
                         {"@x", Value(std::int64_t{i})},
                         {"a/b", Value(std::int64_t{i})},
                         {"meta", dict({{"lang", str("en")}})}}));
  const SourceMapping mapping = map_source(list(rows), "rows.pt");
  // `Label` and `user id` are the user's names and kept; '@x', 'a/b' and the long key are no legal
  // names and are changed as little as makes them legal, each change reported.
  CHECK(column_names(mapping) == std::vector<std::string>{"features", "Label", "user id",
                                                          std::string(255, 'k'), "_@x", "a_b",
                                                          "meta.lang"});
  REQUIRE(mapping.renamed.size() == 3);
  CHECK(mapping.renamed[0].column == std::string(255, 'k'));
  CHECK(mapping.renamed[0].field == "[*]." + long_key);
  CHECK(mapping.renamed[1] == SourceMapping::Renamed{"[*][\"@x\"]", "_@x"});
  CHECK(mapping.renamed[2] == SourceMapping::Renamed{"[*].a/b", "a_b"});
  // A name --field gives is the user's choice, not a rename.
  const SourceMapping named =
      map_source(list(rows), "rows.pt", std::nullopt,
                 {parse_field_spec("features=[*].features"), parse_field_spec("lab=[*].Label")});
  CHECK(named.renamed.empty());
}
