// pack with validation: planted bad rows are dropped exactly, each with its reason, and the
// kept rows, counts, rejects list and shuffle are what the rules say.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "gpucache/error.hpp"
#include "gpucache/npy.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard_io/shard_reader.hpp"
#include "gpucache/validation_json.hpp"
#include "gpucache/verify.hpp"
#include "test_support.hpp"
#include "verify_deep.hpp"

using namespace gpucache;

namespace {

constexpr std::uint64_t kRows = 200, kDim = 24;

std::vector<float> planted_rows() {
  std::mt19937 random(5);
  std::normal_distribution<float> normal;
  std::vector<float> values(kRows * kDim);
  for (auto& v : values) v = normal(random);
  auto row = [&](std::uint64_t r) { return values.data() + r * kDim; };
  row(3)[5] = std::nanf("");
  row(8)[0] = INFINITY;
  row(9)[1] = -INFINITY;
  std::fill(row(15), row(15) + kDim, 0.0f);
  for (std::uint64_t i = 0; i < kDim; ++i) row(40)[i] *= 1e-3f;   // norm ~0.005
  for (std::uint64_t i = 0; i < kDim; ++i) row(50)[i] *= 100.0f;  // norm ~490
  std::memcpy(row(70), row(60), kDim * 4);                        // duplicate of row 60
  return values;
}

std::string save(const test_support::ScratchDir& scratch, const std::vector<float>& values) {
  const std::string path = scratch / "planted.npy";
  write_npy(path, DType::f32, {kRows, kDim},
            [&](std::span<std::byte> out, std::uint64_t first, std::uint64_t count) {
              std::memcpy(out.data(), values.data() + first * kDim, count * kDim * 4);
            });
  return path;
}

std::vector<std::uint64_t> stored_source_rows(const std::string& dataset, std::size_t shards = 1) {
  std::vector<std::uint64_t> rows;
  for (std::size_t s = 0; s < shards; ++s) {
    char name[32];
    std::snprintf(name, sizeof name, "/shard-%05zu.gcs", s);
    shard::ShardReader reader(dataset + name);
    const auto column = *reader.find_column("@source_row");
    const auto* values = reinterpret_cast<const std::int64_t*>(reader.tensor_data(column).data());
    for (std::uint64_t r = 0; r < reader.rows(); ++r)
      rows.push_back(static_cast<std::uint64_t>(values[r]));
  }
  return rows;
}

}  // namespace

TEST_CASE("planted bad rows are dropped exactly, with the right reason each") {
  test_support::ScratchDir scratch;
  const auto values = planted_rows();
  PackOptions options;
  options.inputs = {save(scratch, values)};
  options.output_dir = scratch / "ds";
  options.validation.dedup = true;
  options.validation.device = Device::cpu;
  options.rejects_path = scratch / "rejects.jsonl";
  const auto result = pack(options);
  CHECK(result.rows == kRows - 7);
  CHECK(result.dropped[static_cast<int>(DropReason::nan_inf)] == 3);
  CHECK(result.dropped[static_cast<int>(DropReason::zero)] == 1);
  CHECK(result.dropped[static_cast<int>(DropReason::norm_low)] == 1);
  CHECK(result.dropped[static_cast<int>(DropReason::norm_high)] == 1);
  CHECK(result.dropped[static_cast<int>(DropReason::duplicate)] == 1);

  std::map<std::uint64_t, std::string> rejected;
  std::ifstream rejects(options.rejects_path);
  for (std::string line; std::getline(rejects, line);) {
    const auto json = nlohmann::json::parse(line);
    rejected[json["row"].get<std::uint64_t>()] = json["reason"].get<std::string>();
  }
  CHECK(rejected == std::map<std::uint64_t, std::string>{{3, "nan_inf"},
                                                         {8, "nan_inf"},
                                                         {9, "nan_inf"},
                                                         {15, "zero"},
                                                         {40, "norm_low"},
                                                         {50, "norm_high"},
                                                         {70, "duplicate"}});
  // Every other row is stored, in input order, with its values untouched (f32 in, f32 out).
  const auto kept = stored_source_rows(options.output_dir);
  REQUIRE(kept.size() == kRows - 7);
  std::uint64_t next = 0;
  for (std::uint64_t row : kept) {
    while (rejected.count(next)) ++next;
    CHECK(row == next++);
  }
  shard::ShardReader reader(options.output_dir + "/shard-00000.gcs");
  const auto pitch = reader.layout().columns[0].row_pitch_bytes();
  for (std::size_t i = 0; i < kept.size(); ++i)
    CHECK(std::memcmp(reader.tensor_data(0).data() + i * pitch, values.data() + kept[i] * kDim,
                      kDim * 4) == 0);

  // The manifest carries the same counts, overall and per input.
  std::ifstream manifest_stream(options.output_dir + "/manifest.json");
  const auto manifest = nlohmann::json::parse(manifest_stream);
  CHECK(manifest["dropped"]["nan_inf"] == 3);
  CHECK(manifest["sources"][0]["kept"] == kRows - 7);
  CHECK(manifest["norm_stats"]["embedding"]["count"] == kRows - 7);
  CHECK(manifest["options"]["validation"]["dedup"] == true);
}

TEST_CASE("norm bounds are set from the options") {
  test_support::ScratchDir scratch;
  PackOptions options;
  options.inputs = {save(scratch, planted_rows())};
  options.output_dir = scratch / "ds";
  options.validation.norm_min = 4.0;  // typical norm of a 24-dim standard normal row is ~4.9
  const auto result = pack(options);
  CHECK(result.dropped[static_cast<int>(DropReason::norm_low)] > 10);
}

TEST_CASE(
    "shuffle is a deterministic permutation of the kept rows; sampling keeps the asked share") {
  test_support::ScratchDir scratch;
  const auto input = save(scratch, planted_rows());
  auto run = [&](const std::string& name, std::uint64_t seed, bool shuffle,
                 std::optional<double> sample) {
    PackOptions options;
    options.inputs = {input};
    options.output_dir = scratch / name;
    options.validation.shuffle = shuffle;
    options.validation.seed = seed;
    options.validation.sample_fraction = sample;
    options.shard_rows = 64;
    const auto result = pack(options);
    return stored_source_rows(options.output_dir, result.shards.size());
  };
  const auto plain = run("plain", 0, false, std::nullopt);
  const auto a = run("a", 1, true, std::nullopt), b = run("b", 1, true, std::nullopt),
             c = run("c", 2, true, std::nullopt);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != plain);
  CHECK(std::multiset<std::uint64_t>(a.begin(), a.end()) ==
        std::multiset<std::uint64_t>(plain.begin(), plain.end()));
  const auto half = run("half", 3, false, 0.5);
  CHECK(half.size() == (plain.size() + 1) / 2);
}

TEST_CASE("overflow on conversion: error names the row, clamp saturates, drop removes the row") {
  test_support::ScratchDir scratch;
  auto values = planted_rows();
  // Row 90 has a value too large for f16 but a norm inside the default bounds is impossible with
  // 1e5, so widen the bounds for this test.
  values[90 * kDim] = 1e5f;
  PackOptions options;
  options.inputs = {save(scratch, values)};
  options.output_dir = scratch / "ds";
  options.dtype = DType::f16;
  options.validation.norm_max = 1e6;
  CHECK_THROWS_AS(pack(options), Error);
  options.validation.on_overflow = OverflowPolicy::drop;
  auto result = pack(options);
  CHECK(result.dropped[static_cast<int>(DropReason::overflow)] == 1);
  options.force = true;
  options.validation.on_overflow = OverflowPolicy::clamp;
  result = pack(options);
  CHECK(result.dropped[static_cast<int>(DropReason::overflow)] == 0);
  CHECK(result.overflowed_values == 1);
}

TEST_CASE("--device cuda without a usable GPU is an error, not a silent CPU run") {
  if (cuda_available()) return;
  test_support::ScratchDir scratch;
  PackOptions options;
  options.inputs = {save(scratch, planted_rows())};
  options.output_dir = scratch / "ds";
  options.validation.device = Device::cuda;
  CHECK_THROWS_WITH_AS(pack(options), doctest::Contains("CUDA"), Error);
}

TEST_CASE("verify --deep passes on packed data and finds rows that break the recorded rules") {
  test_support::ScratchDir scratch;
  PackOptions options;
  options.inputs = {save(scratch, planted_rows())};
  options.output_dir = scratch / "ds";
  options.dtype = DType::f16;
  options.validation.normalize = true;
  pack(options);
  VerifyOptions deep;
  deep.deep = true;
  CHECK(verify(options.output_dir, deep).ok());

  // Intact bytes, stricter recorded rules: only --deep can tell.
  options.output_dir = scratch / "loose";
  options.validation.normalize = false;
  options.validation.norm_min = 1e-3;
  pack(options);
  bool hash_ok = false;
  const std::string manifest_path = options.output_dir + "/manifest.json";
  auto manifest = shard::read_manifest(manifest_path, hash_ok);
  // The recorded norm bounds are the column's own (the dataset-wide norm_min is only --norm-min).
  manifest.options["validation"]["columns"]["embedding"]["norm_min"] = 4.5;
  const auto text = shard::manifest_to_text(manifest);
  test_support::write_bytes(manifest_path, {text.begin(), text.end()});
  CHECK(verify(options.output_dir).ok());
  const auto report = verify(options.output_dir, deep);
  REQUIRE_FALSE(report.ok());
  CHECK(report.problems.front().cause.find("norm_low") != std::string::npos);
  CHECK(report.problems.front().location.find("column 'embedding' row") != std::string::npos);
}

namespace {

// The recorded rules of a packed dataset, read back as verify --deep reads them.
ValidationOptions recorded_rules(const std::string& dataset) {
  bool hash_ok = false;
  const auto manifest = shard::read_manifest(dataset + "/manifest.json", hash_ok);
  REQUIRE(hash_ok);
  return validation_options_from_json(manifest.options["validation"], "manifest.json");
}

// The per-column checks recorded for `dataset`, one per validated column.
std::vector<ColumnChecks> recorded_checks(const std::string& dataset) {
  bool hash_ok = false;
  const auto manifest = shard::read_manifest(dataset + "/manifest.json", hash_ok);
  REQUIRE(hash_ok);
  std::vector<std::string> validated;
  for (const auto& name : manifest.sections["validated_columns"])
    validated.push_back(name.get<std::string>());
  std::vector<ColumnChecks> checks;
  for (auto& column : resolve_column_checks(
           validation_options_from_json(manifest.options["validation"], "manifest.json"),
           validated))
    if (!column.checks.empty()) checks.push_back(std::move(column));
  REQUIRE(checks.size() == validated.size());
  return checks;
}

// Rewrites one recorded rule of one column's checks (and the manifest's hash).
void record_column_rule(const std::string& dataset, const std::string& column,
                        const std::string& key, const nlohmann::json& value) {
  bool hash_ok = false;
  const std::string path = dataset + "/manifest.json";
  auto manifest = shard::read_manifest(path, hash_ok);
  manifest.options["validation"]["columns"][column][key] = value;
  const auto text = shard::manifest_to_text(manifest);
  test_support::write_bytes(path, {text.begin(), text.end()});
}

// Rewrites one recorded rule (and the manifest's hash, so only --deep can tell).
void record_rule(const std::string& dataset, const std::string& key, const nlohmann::json& value) {
  bool hash_ok = false;
  const std::string path = dataset + "/manifest.json";
  auto manifest = shard::read_manifest(path, hash_ok);
  manifest.options["validation"][key] = value;
  const auto text = shard::manifest_to_text(manifest);
  test_support::write_bytes(path, {text.begin(), text.end()});
}

// The rules as pack records them: without the choices that never change the bytes, and with the
// per-column checks pack worked out (`columns`, checked on their own).
ValidationOptions as_recorded(ValidationOptions rules,
                              const std::optional<std::vector<ColumnChecks>>& columns) {
  rules.columns = columns;
  rules.output_dtype = ValidationOptions{}.output_dtype;
  rules.device = ValidationOptions{}.device;
  rules.threads = ValidationOptions{}.threads;
  return rules;
}

std::string all_causes(const VerifyReport& report) {
  std::string causes;
  for (const auto& problem : report.problems)
    causes += problem.location + ": " + problem.cause + "\n";
  return causes;
}

}  // namespace

TEST_CASE("verify --deep reads back the rules pack recorded, widened only by the storage type") {
  test_support::ScratchDir scratch;
  VerifyOptions deep;
  deep.deep = true;

  PackOptions options;
  options.inputs = {save(scratch, planted_rows())};
  options.output_dir = scratch / "embeddings";
  options.validation.norm_min = 0.5;
  options.validation.norm_max = 40.0;
  options.validation.dedup = true;
  options.validation.on_overflow = OverflowPolicy::drop;
  options.validation.max_rows_per_source = 150;
  options.validation.sample_fraction = 0.9;
  options.validation.shuffle = true;
  options.validation.seed = 9;
  options.validation.device = Device::cpu;
  options.threads = 2;
  pack(options);
  const ValidationOptions recorded = recorded_rules(options.output_dir);
  CHECK(recorded == as_recorded(options.validation, recorded.columns));
  const auto checks = recorded_checks(options.output_dir);
  REQUIRE(checks.size() == 1);
  const ValidationOptions f32_rules =
      detail::deep_check_rules(recorded, checks, {DType::f32}, deep);
  REQUIRE(f32_rules.columns);
  REQUIRE(f32_rules.columns->size() == 1);
  const ColumnChecks& f32_column = f32_rules.columns->front();
  CHECK(f32_column.norm_min <= 0.5);
  CHECK(f32_column.norm_min > 0.5 * (1 - 1e-5));
  CHECK(f32_column.norm_max >= 40.0);
  CHECK(f32_column.norm_max < 40.0 * (1 + 1e-5));
  CHECK(f32_column.checks.has(Check::dedup));
  CHECK_FALSE(f32_rules.pair_cos_min);
  CHECK_FALSE(f32_rules.pair_cos_max);
  // Rounding to f16 can make distinct rows equal: duplicates are then not re-checked.
  CHECK_FALSE(detail::deep_check_rules(recorded, checks, {DType::f16}, deep)
                  .columns->front()
                  .checks.has(Check::dedup));
  CHECK(verify(options.output_dir, deep).ok());

  PackOptions dialogue;
  dialogue.inputs = {test_support::data_path("jsonl/dialogue.jsonl")};
  dialogue.output_dir = scratch / "dialogue";
  dialogue.dtype = DType::f16;
  dialogue.validation.pair_cos_min = -0.9;
  dialogue.validation.pair_cos_max = 0.95;
  dialogue.validation.normalize = true;
  dialogue.validation.on_overflow = OverflowPolicy::clamp;
  pack(dialogue);
  const ValidationOptions dialogue_recorded = recorded_rules(dialogue.output_dir);
  CHECK(dialogue_recorded == as_recorded(dialogue.validation, dialogue_recorded.columns));
  const auto dialogue_checks = recorded_checks(dialogue.output_dir);
  REQUIRE(dialogue_checks.size() == 2);
  const auto f16_rules =
      detail::deep_check_rules(dialogue_recorded, dialogue_checks, {DType::f16, DType::f16}, deep);
  // Normalised rows have norm 1, whatever norm_min and norm_max were.
  for (const auto& column : *f16_rules.columns) {
    CHECK(column.norm_min < 1.0);
    CHECK(column.norm_max > 1.0);
    CHECK(column.norm_max - column.norm_min < 0.1);
    CHECK(column.checks.has(Check::pair_cos));
  }
  REQUIRE(f16_rules.pair_cos_min);
  REQUIRE(f16_rules.pair_cos_max);
  CHECK(*f16_rules.pair_cos_min < -0.9);
  CHECK(*f16_rules.pair_cos_min > -0.95);
  CHECK(*f16_rules.pair_cos_max > 0.95);
  CHECK(*f16_rules.pair_cos_max < 1.0);
  CHECK(verify(dialogue.output_dir, deep).ok());
}

TEST_CASE("verify --deep finds rows that break each recorded rule it re-checks") {
  test_support::ScratchDir scratch;
  VerifyOptions deep;
  deep.deep = true;
  // Row 70 duplicates row 60; without dedup pack keeps both.
  PackOptions options;
  options.inputs = {save(scratch, planted_rows())};
  options.output_dir = scratch / "ds";
  pack(options);
  REQUIRE(verify(options.output_dir, deep).ok());

  record_column_rule(options.output_dir, "embedding", "norm_max", 5.0);
  auto report = verify(options.output_dir, deep);
  CHECK(all_causes(report).find("breaks the recorded rule: norm_high") != std::string::npos);
  CHECK(all_causes(report).find("norm_low") == std::string::npos);
  record_column_rule(options.output_dir, "embedding", "norm_max", 1000.0);
  record_column_rule(options.output_dir, "embedding", "checks",
                     {"finite", "nonzero", "norm", "dedup"});
  report = verify(options.output_dir, deep);
  REQUIRE(report.problems.size() == 1);
  // Input row 70: six rows before it (3, 8, 9, 15, 40, 50) were dropped.
  CHECK(report.problems[0].location == "column 'embedding' row 64");
  CHECK(report.problems[0].cause.find("breaks the recorded rule: duplicate") == 0);

  // A rule verify cannot read is a problem of the dataset, not a crash.
  record_column_rule(options.output_dir, "embedding", "checks", {"finite", "sharp"});
  report = verify(options.output_dir, deep);
  REQUIRE(report.problems.size() == 1);
  CHECK(report.problems[0].file == "manifest.json");
  CHECK(report.problems[0].location == "options.validation.columns.embedding.checks");
  record_column_rule(options.output_dir, "embedding", "checks", {"finite"});
  record_rule(options.output_dir, "dedup", "yes");
  report = verify(options.output_dir, deep);
  REQUIRE(report.problems.size() == 1);
  CHECK(report.problems[0].file == "manifest.json");
  CHECK(report.problems[0].location == "options.validation.dedup");

  PackOptions dialogue;
  dialogue.inputs = {test_support::data_path("jsonl/dialogue.jsonl")};
  dialogue.output_dir = scratch / "dialogue";
  pack(dialogue);
  REQUIRE(verify(dialogue.output_dir, deep).ok());
  record_rule(dialogue.output_dir, "pair_cos_min", 0.9999);
  // Pair bounds without the two columns' pair_cos check are rules no Validator accepts.
  report = verify(dialogue.output_dir, deep);
  REQUIRE(report.problems.size() == 1);
  CHECK(report.problems[0].location == "options.validation");
  CHECK(report.problems[0].cause.find("pair_cos") != std::string::npos);
  for (const char* column : {"question_embedding", "answer_embedding"})
    record_column_rule(dialogue.output_dir, column, "checks",
                       {"finite", "nonzero", "norm", "pair_cos"});
  report = verify(dialogue.output_dir, deep);
  REQUIRE_FALSE(report.ok());
  CHECK(report.problems[0].cause.find("breaks the recorded rule: pair_cos (") == 0);
  CHECK(report.problems[0].cause.find("cosine") != std::string::npos);
}

TEST_CASE("pack --help lists the drop reasons from the table, in check order") {
  const auto help = test_support::run_cli({"pack", "--help"});
  REQUIRE(help.exit_code == 0);
  // Some checks share their name with their drop reason: look after the reasons' heading.
  std::size_t previous = help.out.find("A row is dropped with the first check it fails");
  REQUIRE(previous != std::string::npos);
  for (const DropReason reason : drop_reasons_in_check_order()) {
    const DropReasonInfo& info = drop_reason_info(reason);
    CAPTURE(info.name);
    const auto line = help.out.find("\n  " + std::string(info.name) + " ", previous);
    REQUIRE(line != std::string::npos);
    CHECK(line > previous);
    const auto end = help.out.find('\n', line + 1);
    CHECK(help.out.substr(line, end - line).ends_with(info.doc));
    previous = line;
  }
}

TEST_CASE("pack --help lists the checks from the check table, in table order") {
  const auto help = test_support::run_cli({"pack", "--help"});
  REQUIRE(help.exit_code == 0);
  std::size_t previous = help.out.find("Checks, per column");
  REQUIRE(previous != std::string::npos);
  const std::size_t reasons = help.out.find("A row is dropped with the first check it fails");
  for (const CheckInfo& info : kChecks) {
    CAPTURE(info.name);
    const auto line = help.out.find("\n  " + std::string(info.name) + " ", previous);
    REQUIRE(line != std::string::npos);
    CHECK(line < reasons);
    const auto end = help.out.find('\n', line + 1);
    CHECK(help.out.substr(line, end - line).ends_with(info.doc));
    previous = line;
  }
}
