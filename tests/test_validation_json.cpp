// The validation rules and drop counts as manifest.json records them: the text pack has always
// written, a round trip of every rule, and what the reader does with missing, unknown and
// malformed keys.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <utility>

#include "gpucache/error.hpp"
#include "gpucache/validation_json.hpp"

using namespace gpucache;
using Json = nlohmann::ordered_json;

namespace {

// How many members an aggregate has: the most braced initialisers it accepts.
struct AnyValue {
  template <typename T>
  operator T() const;
};
template <typename T, std::size_t... I>
constexpr bool initialisable_with(std::index_sequence<I...>) {
  return requires {
    T{(void(I), AnyValue{})...};
  };
}
template <typename T, std::size_t N = 0>
constexpr std::size_t member_count() {
  if constexpr (initialisable_with<T>(std::make_index_sequence<N + 1>{}))
    return member_count<T, N + 1>();
  else
    return N;
}

// Every recorded rule away from its default.
ValidationOptions unusual_rules() {
  ValidationOptions options;
  options.norm_min = 0.25;
  options.norm_max = 12.5;
  options.dedup = true;
  options.pair_cos_min = -0.75;
  options.pair_cos_max = 0.875;
  options.on_overflow = OverflowPolicy::clamp;
  options.normalize = true;
  options.max_rows_per_source = 1234;
  options.sample_fraction = 0.375;
  options.shuffle = true;
  options.seed = 0xfedcba9876543210ull;
  options.columns = {{"images", {Check::finite}},
                     {"keypoints", {Check::finite, Check::norm}, 0.0, INFINITY},
                     {"embedding", {Check::nonzero, Check::norm, Check::dedup}, 0.5, 2.0, true}};
  return options;
}

std::string error_location(const Json& json) {
  try {
    validation_options_from_json(json, "manifest.json");
  } catch (const Error& error) {
    CHECK(error.file() == "manifest.json");
    return error.location();
  }
  return "no error";
}

}  // namespace

// 12 recorded rules, plus output_dtype, device and threads, which are not rules.
static_assert(member_count<ValidationOptions>() == 15,
              "ValidationOptions changed: record a new rule in kRecordedRules "
              "(src/validate/validation_json.cpp) and in unusual_rules() here, or say here why it "
              "is not a rule");

TEST_CASE("the rules are written as pack has always written them") {
  CHECK(validation_options_to_json({}).dump() ==
        R"({"norm_min":0.1,"norm_max":100.0,"dedup":false,"pair_cos_min":null,)"
        R"("pair_cos_max":null,"on_overflow":"error","normalize":false,)"
        R"("max_rows_per_source":null,"sample":null,"shuffle":false,"seed":0})");
  CHECK(validation_options_to_json(unusual_rules()).dump() ==
        R"({"norm_min":0.25,"norm_max":12.5,"dedup":true,"pair_cos_min":-0.75,)"
        R"("pair_cos_max":0.875,"on_overflow":"clamp","normalize":true,)"
        R"("max_rows_per_source":1234,"sample":0.375,"shuffle":true,)"
        R"("seed":18364758544493064720,"columns":{"images":{"checks":["finite"]},)"
        R"("keypoints":{"checks":["finite","norm"],"norm_min":0.0,"norm_max":"inf"},)"
        R"("embedding":{"checks":["nonzero","norm","dedup"],"norm_min":0.5,"norm_max":2.0,)"
        R"("normalized":true}}})");
  // Not rules: they never change the bytes.
  ValidationOptions run_choices;
  run_choices.output_dtype = DType::bf16;
  run_choices.device = Device::cpu;
  run_choices.threads = 3;
  CHECK(validation_options_to_json(run_choices) == validation_options_to_json({}));
}

TEST_CASE(
    "the columns' checks are written whenever set; a manifest without them has the legacy "
    "rules") {
  // Dialogue with dedup, pair bounds and normalisation, as datasets packed before checks were
  // per column recorded it: the rules alone, no "columns".
  ValidationOptions dialogue;
  dialogue.dedup = true;
  dialogue.pair_cos_min = 0.25;
  dialogue.normalize = true;
  const Json without_columns = validation_options_to_json(dialogue);
  CHECK_FALSE(without_columns.contains("columns"));
  // Reading such a manifest back gives the legacy rules for its validated columns.
  const auto read = validation_options_from_json(without_columns, "m");
  CHECK_FALSE(read.columns);
  const auto resolved = resolve_column_checks(read, {"question_embedding", "answer_embedding"});
  REQUIRE(resolved.size() == 2);
  CHECK(resolved[0].checks ==
        CheckSet{Check::finite, Check::nonzero, Check::norm, Check::pair_cos, Check::dedup});
  CHECK(resolved[1].column == "answer_embedding");
  CHECK(resolved[1].normalized);
  CHECK(resolved[1].norm_min == 0.1);

  // Set, they are written even when they equal the legacy rules, so a manifest says every
  // column's checks itself; a column without checks is listed with an empty list.
  dialogue.columns = resolved;
  dialogue.columns->push_back({"labels", {}});
  const Json with_columns = validation_options_to_json(dialogue);
  REQUIRE(with_columns.contains("columns"));
  CHECK(with_columns["columns"]["labels"]["checks"] == Json::array());
  CHECK(with_columns["columns"]["question_embedding"]["checks"] ==
        Json::array({"finite", "nonzero", "norm", "pair_cos", "dedup"}));
  CHECK(validation_options_from_json(with_columns, "m") == dialogue);
  CHECK(resolve_column_checks(validation_options_from_json(with_columns, "m"), {}) ==
        *dialogue.columns);

  // Every difference survives the round trip: a bound, a check, normalisation, a column.
  for (int change = 0; change < 4; ++change) {
    ValidationOptions changed = dialogue;
    ColumnChecks& column = changed.columns->at(1);
    if (change == 0) column.norm_max = 50.0;
    if (change == 1) column.checks.remove(Check::nonzero);
    if (change == 2) column.normalized = false;
    if (change == 3) changed.columns->push_back({"weights", {Check::finite}});
    CAPTURE(change);
    const Json json = validation_options_to_json(changed);
    CHECK(validation_options_from_json(json, "m") == changed);
    CHECK(json != with_columns);
  }
}

TEST_CASE("every rule survives a round trip through JSON and its text") {
  for (const ValidationOptions& options : {ValidationOptions{}, unusual_rules()}) {
    const Json json = validation_options_to_json(options);
    CHECK(validation_options_from_json(json, "m") == options);
    CHECK(validation_options_from_json(Json::parse(json.dump(2)), "m") == options);
  }
  ValidationOptions one_sided;
  one_sided.pair_cos_min = 0.5;
  one_sided.on_overflow = OverflowPolicy::drop;
  one_sided.seed = 0;
  CHECK(validation_options_from_json(validation_options_to_json(one_sided), "m") == one_sided);
  // Open norm bounds: JSON has no infinity, so it is the string "inf".
  ValidationOptions open;
  open.norm_min = 0.0;
  open.norm_max = INFINITY;
  const Json json = validation_options_to_json(open);
  CHECK(json["norm_max"] == "inf");
  CHECK(validation_options_from_json(Json::parse(json.dump()), "m") == open);
}

TEST_CASE("missing rules keep their defaults and unknown keys are ignored") {
  CHECK(validation_options_from_json(Json::object(), "m") == ValidationOptions{});
  const auto read = validation_options_from_json(
      Json::parse(R"({"dedup": true, "a_rule_from_the_future": [1, 2], "seed": 5})"), "m");
  ValidationOptions expected;
  expected.dedup = true;
  expected.seed = 5;
  CHECK(read == expected);
  // A whole number is a valid bound.
  CHECK(validation_options_from_json(Json::parse(R"({"norm_max": 7})"), "m").norm_max == 7.0);
}

TEST_CASE("a rule of the wrong type is an error naming its key") {
  CHECK(error_location(Json::parse(R"({"norm_min": "0.1"})")) == "options.validation.norm_min");
  CHECK(error_location(Json::parse(R"({"dedup": 1})")) == "options.validation.dedup");
  CHECK(error_location(Json::parse(R"({"pair_cos_max": false})")) ==
        "options.validation.pair_cos_max");
  CHECK(error_location(Json::parse(R"({"on_overflow": "wrap"})")) ==
        "options.validation.on_overflow");
  CHECK(error_location(Json::parse(R"({"seed": -1})")) == "options.validation.seed");
  CHECK(error_location(Json::parse(R"({"max_rows_per_source": 2.5})")) ==
        "options.validation.max_rows_per_source");
  CHECK(error_location(Json::parse(R"([1, 2])")) == "options.validation");
  CHECK_THROWS_WITH_AS(validation_options_from_json(Json::parse(R"({"sample": "half"})"), "m"),
                       doctest::Contains("expected a number, got \"half\""), Error);
  CHECK(error_location(Json::parse(R"({"columns": [1]})")) == "options.validation.columns");
  CHECK(error_location(Json::parse(R"({"columns": {"x": 1}})")) == "options.validation.columns.x");
  CHECK(error_location(Json::parse(R"({"columns": {"x": {}}})")) ==
        "options.validation.columns.x.checks");
  CHECK(error_location(Json::parse(R"({"columns": {"x": {"checks": ["finite", "sharp"]}}})")) ==
        "options.validation.columns.x.checks");
  // overflow is no per-column check: it is never recorded, and not read.
  CHECK(error_location(Json::parse(R"({"columns": {"x": {"checks": ["overflow"]}}})")) ==
        "options.validation.columns.x.checks");
  CHECK(error_location(Json::parse(R"({"columns": {"x": {"checks": [], "norm_max": "lots"}}})")) ==
        "options.validation.columns.x.norm_max");
  CHECK(error_location(Json::parse(R"({"columns": {"x": {"checks": [], "normalized": 1}}})")) ==
        "options.validation.columns.x.normalized");
  // A norm check recorded without bounds takes the dataset-wide ones; unknown keys are ignored.
  const auto read = validation_options_from_json(
      Json::parse(R"({"norm_min": 0.5, "columns": {"x": {"checks": ["norm"], "later": 1}}})"), "m");
  REQUIRE(read.columns);
  REQUIRE(read.columns->size() == 1);
  CHECK(read.columns->front().norm_min == 0.5);
  CHECK(read.columns->front().norm_max == 100.0);
}

TEST_CASE("drop counts are named and ordered as in the drop-reason table") {
  ReasonCounts counts{};
  for (std::size_t code = 0; code < kDropReasonCount; ++code) counts[code] = 10 + code;
  const Json json = reason_counts_to_json(counts);
  CHECK(json.dump() ==
        R"({"nan_inf":11,"norm_low":12,"norm_high":13,"zero":14,"duplicate":15,"pair_cos":16,)"
        R"("overflow":17,"null":18})");
  REQUIRE(json.size() == drop_reasons().size());
  std::size_t i = 0;
  for (const auto& [key, value] : json.items()) {
    CHECK(key == drop_reasons()[i].name);
    CHECK(value == counts[static_cast<std::size_t>(drop_reasons()[i].reason)]);
    ++i;
  }
}
