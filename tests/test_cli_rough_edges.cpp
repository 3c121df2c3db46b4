// What a new user hits first, through the real binary: unknown commands, per-command help, --json
// failures, the pack result's device, export -q, and folders pack and export refuse to write.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

using test_support::data_path;
using test_support::run_cli;
namespace fs = std::filesystem;

namespace {

std::size_t lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("an unknown command names itself and lists the commands") {
  for (const auto& arguments : std::vector<std::vector<std::string>>{
           {"mrege"}, {"mrege", "--help"}, {"mrege", "a", "b", "--json"}}) {
    const auto result = run_cli(arguments);
    CAPTURE(result.err);
    CHECK(result.exit_code == 2);
    CHECK(result.err.find("unknown command 'mrege'") != std::string::npos);
    for (const char* command : {"pack", "verify", "inspect", "export", "probe", "merge", "push"})
      CHECK(result.err.find(command) != std::string::npos);
    CHECK(lines(result.err) == 1);
  }
}

TEST_CASE("COMMAND --help shows that command's help and exits 0") {
  for (const char* command : {"pack", "verify", "inspect", "export", "probe", "merge", "push"}) {
    const auto help = run_cli({command, "--help"});
    CAPTURE(command);
    CHECK(help.exit_code == 0);
    CHECK(help.out.find(std::string("gpucache ") + command) != std::string::npos);
    CHECK(help.out.find("Examples") != std::string::npos);
    // Not the main help, which lists every command.
    CHECK(help.out.find("Run 'gpucache COMMAND --help'") == std::string::npos);
  }
}

TEST_CASE("with --json a failure is a JSON object on stdout and one line on stderr, exit 2") {
  const auto missing = run_cli({"verify", "/nonexistent/dataset", "--json"});
  CHECK(missing.exit_code == 2);
  CHECK(lines(missing.err) == 1);
  const auto json = nlohmann::json::parse(missing.out);
  CHECK(json["ok"] == false);
  CHECK(json["exit_code"] == 2);
  CHECK(json["error"].get<std::string>().find("/nonexistent/dataset") != std::string::npos);
  CHECK(missing.err.find(json["error"].get<std::string>()) != std::string::npos);

  // Parse errors too (pack without -o), and an unknown command.
  for (const auto& arguments : std::vector<std::vector<std::string>>{
           {"pack", data_path("npy/f32_c.npy"), "--json"}, {"merge", "--json"}}) {
    const auto failed = run_cli(arguments);
    CHECK(failed.exit_code == 2);
    const auto object = nlohmann::json::parse(failed.out);
    CHECK(object["ok"] == false);
    CHECK(object["exit_code"] == 2);
  }
  // Without --json stdout stays empty.
  CHECK(run_cli({"verify", "/nonexistent/dataset"}).out.empty());
}

TEST_CASE("pack --json gives the device as a name and a reason") {
  test_support::ScratchDir scratch;
  const auto packed = run_cli(
      {"pack", data_path("npy/f32_c.npy"), "-o", scratch / "ds", "--device", "cpu", "--json"});
  REQUIRE(packed.exit_code == 0);
  const auto device = nlohmann::json::parse(packed.out)["device"];
  CHECK(device["name"] == "cpu");
  CHECK(device["reason"] == "--device cpu");
  const auto automatic =
      run_cli({"pack", data_path("npy/f32_c.npy"), "-o", scratch / "auto", "--json"});
  REQUIRE(automatic.exit_code == 0);
  const auto chosen = nlohmann::json::parse(automatic.out)["device"];
  CHECK((chosen["name"] == "cpu" || chosen["name"] == "cuda"));
  CHECK(chosen["reason"].get<std::string>().starts_with("--device auto: "));
}

TEST_CASE("export accepts -q") {
  test_support::ScratchDir scratch;
  REQUIRE(run_cli({"pack", data_path("npy/f32_c.npy"), "-o", scratch / "ds", "-q"}).exit_code == 0);
  const auto exported = run_cli({"export", scratch / "ds", scratch / "out", "-q"});
  CHECK(exported.exit_code == 0);
  CHECK(fs::exists(scratch / "out/embedding.npy"));
}

TEST_CASE("pack refuses a folder that holds other files; export refuses a dataset folder") {
  test_support::ScratchDir scratch;
  const std::string input = data_path("npy/f32_c.npy");
  fs::create_directories(scratch / "photos");
  std::ofstream(scratch / "photos/holiday.jpg") << "not a dataset";
  for (const char* flag : {"-q", "--force"}) {
    const auto refused = run_cli({"pack", input, "-o", scratch / "photos", flag});
    CAPTURE(flag);
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.find("is not empty and holds no gpucache dataset") != std::string::npos);
    CHECK(refused.err.find("holiday.jpg") != std::string::npos);
  }
  CHECK(!fs::exists(scratch / "photos/manifest.json"));
  // An empty folder is fine, and so is replacing a dataset with --force.
  fs::create_directories(scratch / "empty");
  CHECK(run_cli({"pack", input, "-o", scratch / "empty", "-q"}).exit_code == 0);
  CHECK(run_cli({"pack", input, "-o", scratch / "empty", "-q", "--force"}).exit_code == 0);

  const std::string dataset = scratch / "empty";
  for (const auto& arguments : std::vector<std::vector<std::string>>{
           {"export", dataset, dataset},
           {"export", dataset, "--to", "safetensors", dataset + "/all.safetensors"},
           {"export", dataset, "--to", "safetensors", dataset + "/"}}) {
    const auto refused = run_cli(arguments);
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.find("holds a gpucache dataset") != std::string::npos);
  }
  CHECK(!fs::exists(dataset + "/embedding.npy"));
  CHECK(!fs::exists(dataset + "/all.safetensors"));
}

TEST_CASE("an input of more than 65,535 columns is refused at once, naming the file") {
  // One JSON object of 70,000 keys: a column each (a hidden-corpus file of 200,000 keys made pack
  // run past a minute).
  test_support::ScratchDir scratch;
  const std::string input = scratch / "wide.jsonl";
  {
    std::ofstream out(input);
    out << '{';
    for (int i = 0; i < 70000; ++i) out << (i ? "," : "") << "\"k" << i << "\":" << i;
    out << "}\n";
  }
  const auto result = run_cli({"pack", input, "-o", scratch / "ds"});
  CHECK(result.exit_code == 2);
  CHECK(result.err.find("wide.jsonl: maps to 70000 columns; pack takes at most 65535") !=
        std::string::npos);
  CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  CHECK_FALSE(std::filesystem::exists(scratch / "ds"));
}
