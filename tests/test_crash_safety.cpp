// Crash safety of `gpucache pack` under SIGKILL, through the real binary. A pack of a few
// hundred MiB into several shards is killed without warning, at random moments and at moments
// picked from what it has written so far (first shard in progress, a shard renamed into place,
// the manifest being written). After each kill, nothing may pass as a dataset unless it is one:
// `gpucache verify` on the output directory exits 1 (or 2 when the directory was not even
// created), or it exits 0 and every shard and the manifest are byte-identical to an uninterrupted
// run. Then `gpucache pack --resume` (or, with nothing to resume, a plain pack) must finish the
// dataset byte-identically.
//
// Kill times come from a seeded generator; the seed is printed and GPUCACHE_TEST_SEED replays
// it. The uninterrupted run's duration only scales the kill times: nothing here asserts timing.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "gpucache/npy.hpp"
#include "test_support.hpp"

extern char** environ;

using namespace gpucache;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kRandomKills = 24;

std::uint64_t test_seed() {
  if (const char* text = std::getenv("GPUCACHE_TEST_SEED")) return std::stoull(text);
  return std::random_device{}();
}

// 64k rows × 256 f32 (64 MiB), packed to f16 in 8 shards of 8k rows (about 1 s).
void make_input(const std::string& path) {
  std::mt19937 random(5);
  std::uniform_real_distribution<float> uniform(-1, 1);
  write_npy(path, DType::f32, {64 * 1024, 256},
            [&](std::span<std::byte> out, std::uint64_t, std::uint64_t) {
              auto* values = reinterpret_cast<float*>(out.data());
              for (std::size_t i = 0; i < out.size() / 4; ++i) values[i] = uniform(random);
            });
}

std::vector<std::string> pack_arguments(const std::string& input, const std::string& output) {
  return {"pack", input, "-o", output, "--dtype", "f16", "--shard-rows", "8192", "--quiet"};
}

pid_t spawn_cli(const std::vector<std::string>& arguments) {
  std::vector<char*> argv{const_cast<char*>(GPUCACHE_CLI_PATH)};
  for (const auto& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t child = -1;
  const int error = posix_spawn(&child, GPUCACHE_CLI_PATH, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE_MESSAGE(error == 0, "posix_spawn: " << std::strerror(error));
  return child;
}

// Kills the child with SIGKILL (if it is still running) and reaps it. Returns whether the kill
// landed, i.e. the child had not exited yet.
bool kill_and_reap(pid_t child) {
  int status = 0;
  if (::waitpid(child, &status, WNOHANG) == child) return false;
  ::kill(child, SIGKILL);
  REQUIRE(::waitpid(child, &status, 0) == child);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

std::map<std::string, std::vector<char>> dataset_files(const std::string& dir) {
  std::map<std::string, std::vector<char>> files;
  for (const auto& entry : fs::directory_iterator(dir))
    files[entry.path().filename().string()] = test_support::read_bytes(entry.path().string());
  return files;
}

std::string listing(const std::string& dir) {
  std::string text;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error))
    text += " " + entry.path().filename().string();
  return text.empty() ? " (empty or missing)" : text;
}

// The same file names with the same bytes.
void check_same_files(const std::map<std::string, std::vector<char>>& files,
                      const std::map<std::string, std::vector<char>>& expected) {
  CHECK(files.size() == expected.size());
  for (const auto& [name, bytes] : expected) {
    CAPTURE(name);
    const auto found = files.find(name);
    REQUIRE(found != files.end());
    CHECK(found->second == bytes);
  }
}

struct Reference {
  std::string input;
  std::map<std::string, std::vector<char>> files;
  double seconds = 0;
};

const Reference& reference() {
  static test_support::ScratchDir scratch;
  static Reference ref = [] {
    Reference r;
    r.input = scratch / "in.npy";
    make_input(r.input);
    const auto start = Clock::now();
    const auto packed = test_support::run_cli(pack_arguments(r.input, scratch / "whole"));
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    INFO(packed.err);
    REQUIRE(packed.exit_code == 0);
    r.files = dataset_files(scratch / "whole");
    return r;
  }();
  return ref;
}

// What a killed pack left in `dir` must never pass for a dataset unless it is the whole one.
// Returns a short description of the state, for the summary.
std::string check_killed_state(const std::string& dir) {
  const Reference& ref = reference();
  CAPTURE(listing(dir));
  const auto verified = test_support::run_cli({"verify", dir, "--quiet"});
  CAPTURE(verified.out);
  CAPTURE(verified.err);
  if (!fs::exists(dir)) {
    CHECK(verified.exit_code == 2);
    return "no output directory";
  }
  const bool has_manifest = fs::exists(dir + "/manifest.json");
  if (!has_manifest) {
    // Unfinished: verify refuses it.
    CHECK(verified.exit_code == 1);
    std::size_t shards = 0;
    for (const auto& [name, bytes] : dataset_files(dir)) shards += name.ends_with(".gcs");
    // A shard is only ever written after the plan: shards without pack-state.json cannot be
    // resumed, so they must never exist.
    if (shards > 0) CHECK(fs::exists(dir + "/pack-state.json"));
    return std::string("unfinished, ") +
           (fs::exists(dir + "/pack-state.json") ? "plan recorded, " : "no plan, ") +
           std::to_string(shards) + " complete shard(s)";
  }
  // A manifest is written last: verify accepts the dataset, and it is the whole dataset.
  CHECK(verified.exit_code == 0);
  auto files = dataset_files(dir);
  // Killed between writing the manifest and removing the plan: the plan may remain.
  files.erase("pack-state.json");
  check_same_files(files, ref.files);
  return "finished";
}

// Finishes an interrupted pack: --resume where a plan was recorded, else a plain pack from
// scratch, which must accept (and clear) whatever temporaries a run killed before its plan left
// behind. The result must be byte-identical to the uninterrupted run.
void finish_and_compare(const std::string& dir) {
  const Reference& ref = reference();
  if (fs::exists(dir + "/manifest.json")) return;
  const bool resumable = fs::exists(dir + "/pack-state.json");
  auto arguments = pack_arguments(ref.input, dir);
  if (resumable) arguments.push_back("--resume");
  const auto finished = test_support::run_cli(arguments);
  CAPTURE(listing(dir));
  INFO(finished.err);
  REQUIRE(finished.exit_code == 0);
  const auto files = dataset_files(dir);
  check_same_files(files, ref.files);
  CHECK(test_support::run_cli({"verify", dir, "--quiet"}).exit_code == 0);
}

// Polls dir until condition() holds (or the child exits), then kills the child.
bool kill_when(pid_t child, const std::function<bool()>& condition) {
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  int status = 0;
  while (!condition() && Clock::now() < deadline) {
    if (::waitpid(child, &status, WNOHANG) == child) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return kill_and_reap(child);
}

bool exists_named(const std::string& dir, const std::function<bool(const std::string&)>& match) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error))
    if (match(entry.path().filename().string())) return true;
  return false;
}

}  // namespace

TEST_CASE("pack killed with SIGKILL at random moments never leaves a dataset that passes") {
  const Reference& ref = reference();
  const std::uint64_t seed = test_seed();
  MESSAGE("seed " << seed << " (GPUCACHE_TEST_SEED replays it); uninterrupted pack took "
                  << ref.seconds << " s, " << ref.files.size() << " files");
  REQUIRE(ref.files.size() == 9);
  std::mt19937_64 random(seed);
  // Up to 1.3x the uninterrupted run, so some kills land after it finished.
  std::uniform_real_distribution<double> when(0.0, 1.3 * ref.seconds);
  std::map<std::string, int> states;
  int landed = 0;
  for (int attempt = 0; attempt < kRandomKills; ++attempt) {
    test_support::ScratchDir scratch;
    const std::string dir = scratch / "out";
    const double delay = when(random);
    CAPTURE(attempt);
    CAPTURE(delay);
    const pid_t child = spawn_cli(pack_arguments(ref.input, dir));
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    landed += kill_and_reap(child);
    ++states[check_killed_state(dir)];
    finish_and_compare(dir);
  }
  std::string summary;
  for (const auto& [state, count] : states)
    summary += "\n  " + std::to_string(count) + "x " + state;
  MESSAGE(landed << " of " << kRandomKills << " kills landed before pack exited:" << summary);
}

TEST_CASE("pack killed at each stage of its output never leaves a dataset that passes") {
  const Reference& ref = reference();
  struct Stage {
    std::string name;
    std::function<bool(const std::string& dir)> reached;
  };
  const std::vector<Stage> stages{
      {"plan being written",
       [](const std::string& dir) {
         return exists_named(dir, [](auto& n) { return n.starts_with("pack-state"); });
       }},
      {"first shard being written",
       [](const std::string& dir) { return fs::exists(dir + "/shard-00000.gcs.tmp"); }},
      {"first shard renamed into place",
       [](const std::string& dir) { return fs::exists(dir + "/shard-00000.gcs"); }},
      {"middle shard being written",
       [](const std::string& dir) { return fs::exists(dir + "/shard-00003.gcs.tmp"); }},
      {"middle shard renamed into place",
       [](const std::string& dir) { return fs::exists(dir + "/shard-00003.gcs"); }},
      {"last shard renamed into place",
       [](const std::string& dir) { return fs::exists(dir + "/shard-00007.gcs"); }},
      {"manifest being written",
       [](const std::string& dir) {
         return exists_named(dir, [](auto& n) { return n.starts_with("manifest.json"); });
       }},
  };
  REQUIRE(ref.files.count("shard-00007.gcs") == 1);
  int landed = 0;
  for (const auto& stage : stages) {
    test_support::ScratchDir scratch;
    const std::string dir = scratch / "out";
    CAPTURE(stage.name);
    const pid_t child = spawn_cli(pack_arguments(ref.input, dir));
    const bool killed = kill_when(child, [&] { return stage.reached(dir); });
    landed += killed;
    const std::string state = check_killed_state(dir);
    MESSAGE("killed at '" << stage.name << "': " << (killed ? state : "pack had already exited"));
    finish_and_compare(dir);
  }
  CHECK(landed >= 4);
}

TEST_CASE("a resume that is itself killed can be resumed again") {
  const Reference& ref = reference();
  test_support::ScratchDir scratch;
  const std::string dir = scratch / "out";
  const pid_t first = spawn_cli(pack_arguments(ref.input, dir));
  kill_when(first, [&] { return fs::exists(dir + "/shard-00002.gcs"); });
  if (fs::exists(dir + "/manifest.json")) {
    MESSAGE("pack finished before the first kill; nothing to resume on this machine");
    return;
  }
  REQUIRE(fs::exists(dir + "/pack-state.json"));
  auto resume = pack_arguments(ref.input, dir);
  resume.push_back("--resume");
  const pid_t second = spawn_cli(resume);
  kill_when(second, [&] { return fs::exists(dir + "/shard-00005.gcs"); });
  check_killed_state(dir);
  finish_and_compare(dir);
}
