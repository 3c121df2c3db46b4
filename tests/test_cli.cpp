// Runs the real gpucache binary: exit codes, --json output parsed back, one-line errors.
#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

using test_support::data_path;
using test_support::run_cli;
namespace fs = std::filesystem;

namespace {

nlohmann::json json_of(const test_support::RunResult& result) {
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE_NOTHROW(nlohmann::json::parse(result.out));
  return nlohmann::json::parse(result.out);
}

}  // namespace

TEST_CASE("pack, verify, inspect and export end to end with --json") {
  test_support::ScratchDir scratch;
  const std::string dataset = scratch / "ds";
  const auto packed =
      run_cli({"pack", data_path("npy/f32_c.npy"), data_path("npy/f64_big_fortran.npy"), "-o",
               dataset, "--dtype", "f16", "--shard-rows", "8", "--json"});
  REQUIRE(packed.exit_code == 0);
  CHECK(json_of(packed)["rows"] == 14);
  CHECK(packed.err.empty());

  const auto verified = run_cli({"verify", dataset, "--json"});
  CHECK(verified.exit_code == 0);
  CHECK(json_of(verified)["ok"] == true);
  CHECK(json_of(verified)["problems"].empty());

  const auto inspected = json_of(run_cli({"inspect", dataset, "--json"}));
  CHECK(inspected["rows"] == 14);
  REQUIRE(inspected["shards"].size() == 2);
  CHECK(inspected["shards"][0]["file"] == "shard-00000.gcs");
  CHECK(inspected["shards"][0]["rows"] == 8);
  CHECK(inspected["shards"][0]["bytes"].get<std::uint64_t>() ==
        fs::file_size(dataset + "/shard-00000.gcs"));
  const auto& column = inspected["columns"][0];
  CHECK(column["name"] == "embedding");
  CHECK(column["dtype"] == "f16");
  CHECK(column["shape"] == nlohmann::json::array({14, 5}));
  CHECK(column["row_pitch_bytes"] == 32);
  CHECK(inspected["provenance"]["inputs"].size() == 2);
  // 8 rows of 32 bytes end no page: a CPU load joins the shards with a copy, and says so.
  CHECK(inspected["cpu_zero_copy"] == false);
  CHECK(run_cli({"inspect", dataset}).out.find("joined with a copy") != std::string::npos);

  const auto shard = json_of(run_cli({"inspect", dataset + "/shard-00001.gcs", "--json"}));
  CHECK(shard["rows"] == 6);
  CHECK(shard["columns"][0]["offset"].get<std::uint64_t>() % 4096 == 0);

  const auto exported = run_cli({"export", dataset, "--to", "npy", scratch / "out", "--json"});
  CHECK(exported.exit_code == 0);
  CHECK(fs::exists(scratch / "out/embedding.npy"));
  CHECK(fs::exists(scratch / "out/@source_row.npy"));
}

TEST_CASE("verify exits 1 on corruption and names the shard in --json problems") {
  test_support::ScratchDir scratch;
  const std::string dataset = scratch / "ds";
  REQUIRE(run_cli({"pack", data_path("npy/f32_c.npy"), "-o", dataset}).exit_code == 0);
  test_support::flip_byte(dataset + "/shard-00000.gcs", 4100);
  const auto result = run_cli({"verify", dataset, "--json"});
  CHECK(result.exit_code == 1);
  const auto report = json_of(result);
  CHECK(report["ok"] == false);
  REQUIRE(report["problems"].size() == 1);
  CHECK(report["problems"][0]["file"] == "shard-00000.gcs");
  CHECK(report["problems"][0].contains("byte_begin"));
  const auto text = run_cli({"verify", dataset});
  CHECK(text.exit_code == 1);
  CHECK(text.out.find("CORRUPT") != std::string::npos);
}

TEST_CASE("bad input exits 2 with one line on stderr naming the file, and leaves no output") {
  test_support::ScratchDir scratch;
  for (const char* name : {"npy/object.npy", "npy/truncated.npy", "npy/missing.npy"}) {
    CAPTURE(name);
    const auto result = run_cli({"pack", data_path(name), "-o", scratch / "ds"});
    CHECK(result.exit_code == 2);
    CHECK(result.err.find(name) != std::string::npos);
    CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(scratch / "ds/manifest.json"));
  }
  const auto mismatch = run_cli(
      {"pack", data_path("npy/f32_c.npy"), data_path("npy/dim6.npy"), "-o", scratch / "ds"});
  CHECK(mismatch.exit_code == 2);
  CHECK(mismatch.err.find("dim6.npy: embedding f32 [6]") != std::string::npos);
}

TEST_CASE("usage errors exit 2; --help exits 0 and shows examples") {
  CHECK(run_cli({}).exit_code == 2);
  CHECK(run_cli({"pack"}).exit_code == 2);
  CHECK(run_cli({"pack", "x.npy", "-o", "y", "--dtype", "f8"}).exit_code == 2);
  CHECK(run_cli({"pack", "x.npy", "-o", "y", "--shard-size", "lots"}).exit_code == 2);
  for (const char* command : {"pack", "verify", "inspect", "export"}) {
    const auto help = run_cli({command, "--help"});
    CAPTURE(command);
    CHECK(help.exit_code == 0);
    CHECK(help.out.find("Examples") != std::string::npos);
  }
  CHECK(run_cli({"verify", "/nonexistent/dataset"}).exit_code == 2);
}
