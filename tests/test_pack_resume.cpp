// `gpucache pack --resume` after a real SIGKILL: the finished dataset must be byte-identical to an
// uninterrupted run, and the killed state must never pass verify.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "gpucache/error.hpp"
#include "gpucache/npy.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/verify.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

namespace {

void make_input(const std::string& path, std::uint64_t rows, std::uint64_t dim) {
  std::mt19937 random(11);
  std::uniform_real_distribution<float> uniform(-1, 1);
  write_npy(path, DType::f32, {rows, dim},
            [&](std::span<std::byte> out, std::uint64_t, std::uint64_t) {
              auto* values = reinterpret_cast<float*>(out.data());
              for (std::size_t i = 0; i < out.size() / 4; ++i) values[i] = uniform(random);
            });
}

pid_t spawn_pack(const std::vector<std::string>& arguments) {
  const pid_t child = ::fork();
  if (child == 0) {
    std::vector<char*> argv{const_cast<char*>(GPUCACHE_CLI_PATH)};
    for (const auto& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    ::freopen("/dev/null", "w", stdout);
    ::execv(GPUCACHE_CLI_PATH, argv.data());
    ::_exit(127);
  }
  return child;
}

}  // namespace

TEST_CASE("a pack killed after some shards resumes to a byte-identical dataset") {
  test_support::ScratchDir scratch;
  make_input(scratch / "in.npy", 60000, 128);
  const std::vector<std::string> common{scratch / "in.npy", "--dtype", "f16",
                                        "--shard-rows",     "1000",    "-q"};
  auto with_output = [&](const std::string& dir, std::vector<std::string> extra) {
    auto arguments = std::vector<std::string>{"pack"};
    arguments.insert(arguments.end(), common.begin(), common.end());
    arguments.push_back("-o");
    arguments.push_back(dir);
    arguments.insert(arguments.end(), extra.begin(), extra.end());
    return arguments;
  };
  REQUIRE(test_support::run_cli(with_output(scratch / "whole", {})).exit_code == 0);

  const std::string killed = scratch / "killed";
  const pid_t child = spawn_pack(with_output(killed, {}));
  // Wait until a few shards are complete, then kill without warning.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(killed + "/shard-00003.gcs") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (fs::exists(killed + "/manifest.json")) {
    MESSAGE("pack finished before it could be killed; resume path not exercised on this machine");
    return;
  }
  CHECK_FALSE(verify(killed).ok());
  CHECK(fs::exists(killed + "/pack-state.json"));

  // Without --resume the directory is refused and left alone.
  const auto refused = test_support::run_cli(with_output(killed, {}));
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("--resume") != std::string::npos);

  const auto resumed = test_support::run_cli(with_output(killed, {"--resume", "--json"}));
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.out.find("\"resumed_shards\": 0") == std::string::npos);
  CHECK(verify(killed).ok());
  CHECK_FALSE(fs::exists(killed + "/pack-state.json"));
  for (const auto& entry : fs::directory_iterator(scratch / "whole")) {
    const auto name = entry.path().filename().string();
    CAPTURE(name);
    CHECK(test_support::read_bytes(entry.path().string()) ==
          test_support::read_bytes(killed + "/" + name));
  }
}

TEST_CASE(
    "resume refuses changed options, a finished dataset, and a directory with nothing to resume") {
  test_support::ScratchDir scratch;
  make_input(scratch / "in.npy", 100, 8);
  PackOptions options;
  options.inputs = {scratch / "in.npy"};
  options.output_dir = scratch / "ds";
  options.resume = true;
  CHECK_THROWS_WITH_AS(pack(options), doctest::Contains("no interrupted pack"), Error);
  options.resume = false;
  pack(options);
  options.resume = true;
  CHECK_THROWS_WITH_AS(pack(options), doctest::Contains("already finished"), Error);
  // Simulate an interruption: drop the manifest, put back a plan from different options.
  fs::remove(scratch / "ds/manifest.json");
  test_support::write_bytes(scratch / "ds/pack-state.json", {'{', '}'});
  CHECK_THROWS_WITH_AS(pack(options), doctest::Contains("in the interrupted pack but"), Error);
  CHECK(fs::exists(scratch / "ds/shard-00000.gcs"));  // a refused resume keeps what is there
}

TEST_CASE("a directory holding only temporaries of a pack killed before its plan packs afresh") {
  test_support::ScratchDir scratch;
  make_input(scratch / "in.npy", 100, 8);
  fs::create_directories(scratch / "ds");
  test_support::write_bytes(scratch / "ds/pack-state.json.tmp", {'{'});
  test_support::write_bytes(scratch / "ds/shard-00000.gcs.tmp", {'x'});
  test_support::write_bytes(scratch / "ds/notes.txt", {'n'});  // not ours: left alone
  PackOptions options;
  options.inputs = {scratch / "in.npy"};
  options.output_dir = scratch / "ds";
  pack(options);
  CHECK_FALSE(fs::exists(scratch / "ds/pack-state.json.tmp"));
  CHECK_FALSE(fs::exists(scratch / "ds/shard-00000.gcs.tmp"));
  CHECK(fs::exists(scratch / "ds/notes.txt"));
  CHECK(verify(scratch / "ds").ok());

  // A finished plan is an unfinished pack: it still needs --resume or --force.
  fs::remove(scratch / "ds/manifest.json");
  test_support::write_bytes(scratch / "ds/pack-state.json", {'{', '}'});
  CHECK_THROWS_WITH_AS(pack(options), doctest::Contains("unfinished pack"), Error);
}
