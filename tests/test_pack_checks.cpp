// Per-column checks through the gpucache binary (issue #14, "Column roles and checks"): defaults by
// role, --checks COLUMN=..., --no-checks, --norm-min 0, any number of checked columns, the rejects
// report naming the failing column, the checks recorded in the manifest, shown by inspect and
// re-run by verify --deep.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpucache/npy.hpp"
#include "gpucache/shard/manifest.hpp"
#include "pack_test_support.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

constexpr std::uint64_t kRows = 30;

// An image-like dataset, one file per column: labels [N] i64; keypoints [N, 21, 3] f32, all zero
// in every third row (missing) and with a NaN in row 20; weights [N] f32 in [0, 0.145].
struct Files {
  std::string labels, keypoints, weights;
};

Files write_files(const test_support::ScratchDir& scratch) {
  Files files{scratch / "labels.npy", scratch / "keypoints.npy", scratch / "weights.npy"};
  std::vector<std::int64_t> labels;
  std::vector<float> keypoints, weights;
  for (std::uint64_t r = 0; r < kRows; ++r) {
    labels.push_back(static_cast<std::int64_t>(r % 7));
    weights.push_back(static_cast<float>(r) * 0.005f);
    for (int k = 0; k < 63; ++k)
      keypoints.push_back(r % 3 == 0 ? 0.0f : static_cast<float>(r) + k * 0.25f);
  }
  keypoints[20 * 63 + 10] = std::nanf("");
  test_support::save_npy(files.labels, DType::i64, {kRows}, labels);
  test_support::save_npy(files.keypoints, DType::f32, {kRows, 21, 3}, keypoints);
  test_support::save_npy(files.weights, DType::f32, {kRows}, weights);
  return files;
}

std::vector<std::string> field_arguments(const Files& files) {
  return {"--field", "labels=" + files.labels,  "--field", "keypoints=" + files.keypoints,
          "--field", "weights=" + files.weights};
}

// `gpucache pack` with the files' columns, to `out`, and `extra` arguments.
test_support::RunResult pack(const Files& files, const std::string& out,
                             const std::vector<std::string>& extra) {
  std::vector<std::string> arguments{"pack", "-o", out, "--quiet"};
  for (const auto& argument : field_arguments(files)) arguments.push_back(argument);
  for (const auto& argument : extra) arguments.push_back(argument);
  return test_support::run_cli(arguments);
}

Json read_json(const std::string& path) {
  std::ifstream stream(path);
  return Json::parse(stream);
}

std::vector<Json> read_lines(const std::string& path) {
  std::ifstream stream(path);
  std::vector<Json> lines;
  for (std::string line; std::getline(stream, line);) lines.push_back(Json::parse(line));
  return lines;
}

// manifest.json's recorded checks of `column`.
Json recorded(const std::string& dataset, const std::string& column) {
  return read_json(dataset + "/manifest.json")["options"]["validation"]["columns"][column];
}

// inspect --json's column entry named `name`.
Json inspected_column(const std::string& dataset, const std::string& name) {
  const auto inspect = test_support::run_cli({"inspect", dataset, "--json"});
  REQUIRE(inspect.exit_code == 0);
  const Json report = Json::parse(inspect.out);
  for (const auto& column : report["columns"])
    if (column["name"] == name) return column;
  FAIL("no column " << name);
  return {};
}

// Rewrites the manifest (and its hash, so that only --deep can tell).
void edit_manifest(const std::string& dataset, const std::function<void(shard::Manifest&)>& edit) {
  bool hash_ok = false;
  const std::string path = dataset + "/manifest.json";
  auto manifest = shard::read_manifest(path, hash_ok);
  REQUIRE(hash_ok);
  edit(manifest);
  const auto text = shard::manifest_to_text(manifest);
  test_support::write_bytes(path, {text.begin(), text.end()});
}

}  // namespace

TEST_CASE("defaults by role: a float tensor is checked only for finite values, nothing else is") {
  test_support::ScratchDir scratch;
  const Files files = write_files(scratch);
  const std::string out = scratch / "ds";
  const auto run = pack(files, out, {"--rejects", scratch / "rejects.jsonl"});
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);

  // Only the keypoints row with a NaN is dropped: all-zero keypoints and small weights are kept.
  const Json manifest = read_json(out + "/manifest.json");
  CHECK(manifest["rows"] == kRows - 1);
  CHECK(manifest["dropped"]["nan_inf"] == 1);
  const auto rejects = read_lines(scratch / "rejects.jsonl");
  REQUIRE(rejects.size() == 1);
  CHECK(rejects[0]["row"] == 20);
  CHECK(rejects[0]["reason"] == "nan_inf");
  CHECK(rejects[0]["column"] == "keypoints");
  // A per-sample weight is stored densely: 4 bytes a row.
  for (const auto& column : manifest["columns"])
    if (column["name"] == "weights") CHECK(column["row_pitch_bytes"] == 4);

  // The manifest records every column's checks; inspect shows them.
  CHECK(recorded(out, "labels")["checks"] == Json::array());
  CHECK(recorded(out, "keypoints")["checks"] == Json::array({"finite"}));
  CHECK(recorded(out, "weights")["checks"] == Json::array({"finite"}));
  CHECK_FALSE(recorded(out, "weights").contains("norm_min"));
  CHECK(manifest["validated_columns"] == Json::array({"keypoints", "weights"}));
  CHECK(inspected_column(out, "labels")["checks"] == Json::array());
  CHECK(inspected_column(out, "keypoints")["checks"] == Json::array({"finite"}));
  const auto text = test_support::run_cli({"inspect", out});
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("checks: finite") != std::string::npos);
  CHECK(text.out.find("checks: none") != std::string::npos);  // labels
  CHECK(test_support::run_cli({"verify", out, "--deep"}).exit_code == 0);
}

TEST_CASE("--checks COLUMN=... replaces one column's defaults; the rejects name the column") {
  test_support::ScratchDir scratch;
  const Files files = write_files(scratch);
  const std::string out = scratch / "ds";
  // Keypoints unchecked (the NaN row stays); weights need a norm of at least 0.05.
  const auto run = pack(files, out,
                        {"--checks", "keypoints=none", "--checks",
                         "weights=finite,norm:0.05:", "--rejects", scratch / "rejects.jsonl"});
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const Json manifest = read_json(out + "/manifest.json");
  // Weights r * 0.005 < 0.05 for r < 10 (row 10 is 0.05 in f32, just above or below: count it).
  const auto rejects = read_lines(scratch / "rejects.jsonl");
  REQUIRE(rejects.size() >= 10);
  REQUIRE(rejects.size() <= 11);
  for (std::size_t i = 0; i < rejects.size(); ++i) {
    CHECK(rejects[i]["row"] == i);
    // Row 0's weight is 0: no lower norm fails it first.
    CHECK(rejects[i]["reason"] == "norm_low");
    CHECK(rejects[i]["column"] == "weights");
  }
  CHECK(manifest["rows"] == kRows - rejects.size());
  CHECK(recorded(out, "keypoints")["checks"] == Json::array());
  const Json weights = recorded(out, "weights");
  CHECK(weights["checks"] == Json::array({"finite", "norm"}));
  CHECK(weights["norm_min"] == 0.05);
  CHECK(weights["norm_max"] == 100.0);  // the dataset-wide --norm-max
  CHECK(inspected_column(out, "weights")["norm_range"] == Json::array({0.05, 100.0}));
  CHECK(test_support::run_cli({"inspect", out}).out.find("finite, norm in [0.05, 100]") !=
        std::string::npos);

  // verify --deep re-runs exactly the recorded checks: a stricter recorded bound is found, in the
  // column it was recorded for.
  CHECK(test_support::run_cli({"verify", out, "--deep"}).exit_code == 0);
  edit_manifest(out, [](shard::Manifest& manifest) {
    manifest.options["validation"]["columns"]["weights"]["norm_min"] = 0.1;
  });
  CHECK(test_support::run_cli({"verify", out}).exit_code == 0);
  const auto deep = test_support::run_cli({"verify", out, "--deep", "--json"});
  CHECK(deep.exit_code == 1);
  CHECK(deep.out.find("column 'weights' row 0") != std::string::npos);
  CHECK(deep.out.find("norm_low") != std::string::npos);
  CHECK(deep.out.find("keypoints") == std::string::npos);  // recorded without checks
  // ... and a check recorded for a column is re-run even where the defaults would not have it.
  edit_manifest(out, [](shard::Manifest& manifest) {
    manifest.options["validation"]["columns"]["weights"]["norm_min"] = 0.05;
    manifest.options["validation"]["columns"]["keypoints"]["checks"] = {"finite"};
  });
  const auto finite = test_support::run_cli({"verify", out, "--deep", "--json"});
  CHECK(finite.exit_code == 1);
  // Input row 20, after the dropped rows before it.
  const std::string row = "column 'keypoints' row " + std::to_string(20 - rejects.size());
  CHECK(finite.out.find(row) != std::string::npos);
  CHECK(finite.out.find("nan_inf") != std::string::npos);
}

TEST_CASE("--no-checks keeps every row and records no checks; conflicting options are refused") {
  test_support::ScratchDir scratch;
  const Files files = write_files(scratch);
  const std::string out = scratch / "ds";
  const auto run = pack(files, out, {"--no-checks"});
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const Json manifest = read_json(out + "/manifest.json");
  CHECK(manifest["rows"] == kRows);
  for (const char* column : {"labels", "keypoints", "weights"})
    CHECK(recorded(out, column)["checks"] == Json::array());
  CHECK(manifest["validated_columns"] == Json::array());
  CHECK(test_support::run_cli({"verify", out, "--deep"}).exit_code == 0);

  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--no-checks", "--checks", "weights=finite"},
        {"--no-checks", "--dedup"},
        {"--checks", "labels=finite"},     // i64: no float values to check
        {"--checks", "nothere=finite"},    // no such column
        {"--checks", "weights=sharp"},     // no such check
        {"--checks", "weights=overflow"},  // not chosen per column
        {"--checks", "weights=none,finite"},
        {"--checks", "weights=finite", "--checks", "weights=norm"},
        {"--checks", "weights=finite,norm:2:1"},
        {"--checks", "weights"}}) {
    CAPTURE(extra);
    const auto refused = pack(files, scratch / "refused", extra);
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.find('\n') == refused.err.size() - 1);  // one line
    CHECK_FALSE(fs::exists(scratch / "refused"));
  }
  const auto unknown = pack(files, scratch / "refused", {"--checks", "nothere=finite"});
  CHECK(unknown.err.find("labels, keypoints, weights") != std::string::npos);
  const auto integer = pack(files, scratch / "refused", {"--checks", "labels=finite"});
  CHECK(integer.err.find("i64") != std::string::npos);
}

TEST_CASE("--norm-min 0 is no lower bound and --norm-max inf no upper bound") {
  test_support::ScratchDir scratch;
  // Embeddings [N, 8] f32 with norms from 1e-4 to 1e4; row 0 all zero.
  std::vector<float> rows(kRows * 8, 0.0f);
  for (std::uint64_t r = 1; r < kRows; ++r)
    rows[r * 8 + r % 8] = static_cast<float>(std::pow(10.0, -4.0 + 8.0 * double(r) / kRows));
  test_support::save_npy(scratch / "emb.npy", DType::f32, {kRows, 8}, rows);
  const auto run = test_support::run_cli({"pack", scratch / "emb.npy", "-o", scratch / "ds",
                                          "--quiet", "--norm-min", "0", "--norm-max", "inf"});
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const Json manifest = read_json(scratch / "ds/manifest.json");
  CHECK(manifest["rows"] == kRows - 1);  // the zero row still fails nonzero
  CHECK(manifest["dropped"]["zero"] == 1);
  const Json embedding = recorded(scratch / "ds", "embedding");
  CHECK(embedding["checks"] == Json::array({"finite", "nonzero", "norm"}));
  CHECK(embedding["norm_min"] == 0.0);
  CHECK(embedding["norm_max"] == "inf");
  CHECK(test_support::run_cli({"verify", scratch / "ds", "--deep"}).exit_code == 0);
  CHECK(test_support::run_cli({"inspect", scratch / "ds"}).out.find("norm in [0, inf]") !=
        std::string::npos);

  // The default bounds drop the small and large norms.
  const auto defaults =
      test_support::run_cli({"pack", scratch / "emb.npy", "-o", scratch / "defaults", "--quiet"});
  REQUIRE(defaults.exit_code == 0);
  const Json strict = read_json(scratch / "defaults/manifest.json");
  CHECK(strict["dropped"]["norm_low"] > 0);
  CHECK(strict["dropped"]["norm_high"] > 0);
  // A negative bound is still refused.
  CHECK(test_support::run_cli(
            {"pack", scratch / "emb.npy", "-o", scratch / "bad", "--norm-min", "-1"})
            .exit_code == 2);
}

TEST_CASE("any number of embedding columns are checked, each with its own checks") {
  test_support::ScratchDir scratch;
  // Four embedding columns [N, 16]; column c has a bad row at row 3 + c: NaN, zero, a tiny norm,
  // a huge norm.
  std::vector<std::string> arguments{"pack",    "-o",        scratch / "ds",
                                     "--quiet", "--rejects", scratch / "rejects.jsonl"};
  const char* names[] = {"a", "b", "c", "d"};
  for (int c = 0; c < 4; ++c) {
    std::vector<float> rows(kRows * 16);
    for (std::uint64_t i = 0; i < rows.size(); ++i)
      rows[i] = static_cast<float>((i * 37 + c * 11) % 13) * 0.25f - 1.4f;
    float* bad = rows.data() + (3 + c) * 16;
    if (c == 0) bad[5] = std::nanf("");
    if (c == 1) std::fill_n(bad, 16, 0.0f);
    if (c == 2) std::fill_n(bad, 16, 1e-4f);
    if (c == 3) std::fill_n(bad, 16, 1e4f);
    const std::string file = scratch / (std::string(names[c]) + ".npy");
    test_support::save_npy(file, DType::f32, {kRows, 16}, rows);
    for (const std::string argument : {std::string("--field"), std::string(names[c]) + "=" + file,
                                       std::string("--role"), std::string(names[c]) + "=embedding"})
      arguments.push_back(argument);
  }
  // Column d is checked for finite values only, so its huge row stays; a and b are stored in
  // types of their own.
  for (const char* argument : {"--checks", "d=finite", "--dtype", "a=f16", "--dtype", "b=bf16"})
    arguments.push_back(argument);
  const auto run = test_support::run_cli(arguments);
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const auto rejects = read_lines(scratch / "rejects.jsonl");
  REQUIRE(rejects.size() == 3);
  CHECK(rejects[0]["row"] == 3);
  CHECK(rejects[0]["column"] == "a");
  CHECK(rejects[0]["reason"] == "nan_inf");
  CHECK(rejects[1]["row"] == 4);
  CHECK(rejects[1]["column"] == "b");
  CHECK(rejects[1]["reason"] == "zero");
  CHECK(rejects[2]["row"] == 5);
  CHECK(rejects[2]["column"] == "c");
  CHECK(rejects[2]["reason"] == "norm_low");
  const Json manifest = read_json(scratch / "ds/manifest.json");
  CHECK(manifest["validated_columns"] == Json::array({"a", "b", "c", "d"}));
  CHECK(manifest["columns"][0]["dtype"] == "f16");
  CHECK(manifest["columns"][1]["dtype"] == "bf16");
  CHECK(manifest["columns"][2]["dtype"] == "f32");
  CHECK(manifest["norm_stats"].size() == 3);  // the columns with the norm check
  CHECK(recorded(scratch / "ds", "d")["checks"] == Json::array({"finite"}));
  CHECK(test_support::run_cli({"verify", scratch / "ds", "--deep"}).exit_code == 0);
  // The recorded checks of column d, tightened, make verify --deep find its huge row.
  edit_manifest(scratch / "ds", [](shard::Manifest& manifest) {
    manifest.options["validation"]["columns"]["d"] = {
        {"checks", {"finite", "norm"}}, {"norm_min", 0.1}, {"norm_max", 100.0}};
  });
  const auto deep = test_support::run_cli({"verify", scratch / "ds", "--deep", "--json"});
  CHECK(deep.exit_code == 1);
  CHECK(deep.out.find("column 'd' row 3") != std::string::npos);  // input row 6, after 3 drops
  CHECK(deep.out.find("norm_high") != std::string::npos);
}

TEST_CASE("a manifest without per-column checks (packed before them) has the legacy rules") {
  test_support::ScratchDir scratch;
  std::vector<float> rows(kRows * 8);
  for (std::uint64_t i = 0; i < rows.size(); ++i) rows[i] = 0.1f + static_cast<float>(i % 9);
  test_support::save_npy(scratch / "emb.npy", DType::f32, {kRows, 8}, rows);
  const std::string out = scratch / "ds";
  REQUIRE(test_support::run_cli({"pack", scratch / "emb.npy", "-o", out, "--quiet"}).exit_code ==
          0);
  edit_manifest(out, [](shard::Manifest& manifest) {
    manifest.options["validation"].erase("columns");
    manifest.options["validation"]["norm_min"] = 15.0;
  });
  // The validated column gets finite, nonzero and norm within the dataset-wide bounds.
  CHECK(inspected_column(out, "embedding")["checks"] == Json::array({"finite", "nonzero", "norm"}));
  CHECK(inspected_column(out, "embedding")["norm_range"] == Json::array({15.0, 100.0}));
  const auto deep = test_support::run_cli({"verify", out, "--deep", "--json"});
  CHECK(deep.exit_code == 1);
  CHECK(deep.out.find("norm_low") != std::string::npos);
  CHECK(deep.out.find("column 'embedding' row") != std::string::npos);
}
