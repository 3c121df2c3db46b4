// `gpucache pack` against a full disk, a read-only file system and permission denials, through the
// real binary: each gives one clear error line (the file and the system's reason), exit code 2,
// and leaves no partial dataset behind.
//
// The disks are small tmpfs mounts made in a private mount namespace of this test process (they
// vanish with it); permission denials run the binary as `nobody` with setpriv, since root ignores
// permission bits. Where the process may not mount (no CAP_SYS_ADMIN) or switch users, the cases
// say so and skip.
#include <doctest/doctest.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "gpucache/npy.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;
using test_support::run_cli;

namespace {

// True once this process has a private mount namespace it may mount in.
bool can_mount() {
  static const bool allowed = [] {
    if (::unshare(CLONE_NEWNS) != 0) {
      MESSAGE("skipping: cannot create a mount namespace (" << std::strerror(errno) << ")");
      return false;
    }
    if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      MESSAGE("skipping: cannot make mounts private (" << std::strerror(errno) << ")");
      return false;
    }
    return true;
  }();
  return allowed;
}

// A tmpfs of `bytes` at dir, unmounted at scope exit.
class Tmpfs {
 public:
  Tmpfs(const std::string& dir, std::uint64_t bytes) : dir_(dir) {
    fs::create_directories(dir);
    const std::string options = "size=" + std::to_string(bytes) + ",mode=0755";
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) == 0;
    INFO("mount tmpfs at " << dir << ": " << std::strerror(errno));
    REQUIRE(mounted_);
  }
  ~Tmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  void remount_read_only() {
    REQUIRE(::mount("tmpfs", dir_.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0);
  }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// 1000 rows of 10 f32 (padded to 16) in shards of 200 rows: five shards of 7 pages each. Values
// are normal, so pack's default validation keeps every row.
std::string make_input(const test_support::ScratchDir& scratch) {
  const std::string path = scratch / "in.npy";
  std::mt19937 random(3);
  std::normal_distribution<float> normal;
  write_npy(path, DType::f32, {1000, 10},
            [&](std::span<std::byte> out, std::uint64_t, std::uint64_t) {
              auto* values = reinterpret_cast<float*>(out.data());
              for (std::size_t i = 0; i < out.size() / 4; ++i) values[i] = normal(random);
            });
  return path;
}

std::vector<std::string> pack_arguments(const std::string& input, const std::string& output) {
  return {"pack", input, "-o", output, "--shard-rows", "200", "--quiet"};
}

std::vector<std::string> dataset_files(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("shard-") || name.starts_with("manifest") ||
        name.starts_with("pack-state"))
      names.push_back(name);
  }
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += " " + name;
  return text;
}

// One line on stderr: "gpucache: error: <file>: <cause>".
void check_one_line_error(const test_support::RunResult& result, const std::string& file,
                          const std::string& cause) {
  INFO("stderr: " << result.err);
  CHECK(result.exit_code == 2);
  CHECK(result.err.starts_with("gpucache: error: "));
  CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  CHECK(result.err.find(file) != std::string::npos);
  CHECK(result.err.find(cause) != std::string::npos);
}

// Runs the binary as nobody; nullopt when this process cannot switch users.
std::optional<test_support::RunResult> run_as_nobody(const std::vector<std::string>& arguments) {
  if (::geteuid() != 0 || (!fs::exists("/usr/bin/setpriv") && !fs::exists("/bin/setpriv")))
    return std::nullopt;
  test_support::ScratchDir scratch;
  std::string command = "setpriv --reuid=65534 --regid=65534 --clear-groups " +
                        test_support::shell_quote(GPUCACHE_CLI_PATH);
  for (const auto& argument : arguments) command += " " + test_support::shell_quote(argument);
  command += " >" + test_support::shell_quote(scratch / "out") + " 2>" +
             test_support::shell_quote(scratch / "err") + " </dev/null";
  const int status = std::system(command.c_str());
  test_support::RunResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const auto out = test_support::read_bytes(scratch / "out");
  const auto err = test_support::read_bytes(scratch / "err");
  result.out.assign(out.begin(), out.end());
  result.err.assign(err.begin(), err.end());
  return result;
}

}  // namespace

TEST_CASE("a disk that fills up at any point of a pack gives a clear error and leaves nothing") {
  if (!can_mount()) return;
  test_support::ScratchDir scratch;
  const std::string input = make_input(scratch);
  // The room the whole dataset needs, in pages, from a pack on the ordinary disk.
  REQUIRE(run_cli(pack_arguments(input, scratch / "reference")).exit_code == 0);
  std::uint64_t pages = 1;  // pack-state.json, written first and removed last
  for (const auto& entry : fs::directory_iterator(scratch / "reference"))
    pages += (entry.file_size() + 4095) / 4096;
  REQUIRE(pages > 30);

  // Every amount of free room from none to enough (a disk of the final size, partly taken by a
  // filler file): the pack runs out of room writing the plan, each shard or the manifest, or
  // finishes. Pack refuses a run that does not fit before writing (the next case); told here that
  // the disk is large, it writes until the disk is full, as when another writer fills it first.
  ::setenv("GPUCACHE_TEST_FREE_BYTES", "1099511627776", 1);
  struct Unset {
    ~Unset() { ::unsetenv("GPUCACHE_TEST_FREE_BYTES"); }
  } unset;
  std::set<std::string> failed_in;
  bool finished = false;
  const std::uint64_t disk_pages = pages + 1;
  for (std::uint64_t free_pages = 0; free_pages <= disk_pages; ++free_pages) {
    const std::string mount = scratch / ("disk" + std::to_string(free_pages));
    Tmpfs disk(mount, disk_pages * 4096);
    if (free_pages < disk_pages)
      test_support::write_bytes(mount + "/filler",
                                std::vector<char>((disk_pages - free_pages) * 4096, 'x'));
    const std::string output = mount + "/ds";
    const auto result = run_cli(pack_arguments(input, output));
    CAPTURE(free_pages);
    CAPTURE(result.err);
    CAPTURE(joined(dataset_files(output)));
    if (result.exit_code == 0) {
      finished = true;
      CHECK(run_cli({"verify", output, "--quiet"}).exit_code == 0);
      continue;
    }
    check_one_line_error(result, output, "No space left on device (the disk is full)");
    CHECK(dataset_files(output).empty());
    const auto at = result.err.find(output + "/");
    if (at != std::string::npos) {
      const auto name = result.err.substr(at + output.size() + 1);
      failed_in.insert(name.substr(0, name.find_first_of(".:")));
    }
  }
  CAPTURE(joined({failed_in.begin(), failed_in.end()}));
  CHECK(finished);
  CHECK(failed_in.count("pack-state") == 1);
  CHECK(failed_in.count("shard-00000") == 1);
  CHECK(failed_in.count("shard-00004") == 1);
  CHECK(failed_in.count("manifest") == 1);
}

TEST_CASE("a disk too small for the output is refused before anything is written") {
  if (!can_mount()) return;
  test_support::ScratchDir scratch;
  const std::string input = make_input(scratch);
  // 74 KiB of shards and a margin of 1 MiB + 1 KiB per shard: a 1 MiB disk is too small (as
  // statvfs says), a 2 MiB one is not.
  const std::string small = scratch / "small";
  Tmpfs small_disk(small, 1 << 20);
  const auto refused = run_cli(pack_arguments(input, small + "/ds"));
  check_one_line_error(refused, small + "/ds", "1.0 MiB (1048576 bytes) free");
  CHECK(refused.err.find("free space") != std::string::npos);
  CHECK_FALSE(fs::exists(small + "/ds"));
  const std::string large = scratch / "large";
  Tmpfs large_disk(large, 2 << 20);
  CHECK(run_cli(pack_arguments(input, large + "/ds")).exit_code == 0);
}

TEST_CASE("a read-only output file system gives a clear error") {
  if (!can_mount()) return;
  test_support::ScratchDir scratch;
  const std::string input = make_input(scratch);
  const std::string mount = scratch / "ro";
  Tmpfs disk(mount, 4 << 20);
  fs::create_directories(mount + "/empty");
  REQUIRE(run_cli(pack_arguments(input, mount + "/ds")).exit_code == 0);
  disk.remount_read_only();

  SUBCASE("a new output directory") {
    check_one_line_error(run_cli(pack_arguments(input, mount + "/new")), mount + "/new",
                         "Read-only file system");
    CHECK_FALSE(fs::exists(mount + "/new"));
  }
  SUBCASE("an existing empty output directory") {
    check_one_line_error(run_cli(pack_arguments(input, mount + "/empty")), mount + "/empty",
                         "Read-only file system");
    CHECK(dataset_files(mount + "/empty").empty());
  }
  SUBCASE("replacing a dataset with --force leaves the old one intact") {
    auto arguments = pack_arguments(input, mount + "/ds");
    arguments.push_back("--force");
    check_one_line_error(run_cli(arguments), mount + "/ds", "Read-only file system");
  }
  // Reading needs no write access.
  CHECK(run_cli({"verify", mount + "/ds", "--quiet"}).exit_code == 0);
}

TEST_CASE("permission denials give clear errors") {
  test_support::ScratchDir scratch;
  const std::string input = make_input(scratch);
  fs::permissions(scratch.path(), fs::perms::owner_all | fs::perms::group_read |
                                      fs::perms::group_exec | fs::perms::others_read |
                                      fs::perms::others_exec);
  auto probe = run_as_nobody({"--version"});
  if (!probe || probe->exit_code != 0) {
    MESSAGE("skipping: cannot run the binary as nobody (needs root and setpriv)");
    return;
  }
  SUBCASE("output directory not writable") {
    const auto result = run_as_nobody(pack_arguments(input, scratch / "ds"));
    check_one_line_error(*result, scratch / "ds", "Permission denied");
    CHECK_FALSE(fs::exists(scratch / "ds"));
  }
  SUBCASE("existing output directory not writable") {
    fs::create_directories(scratch / "ds");
    const auto result = run_as_nobody(pack_arguments(input, scratch / "ds"));
    check_one_line_error(*result, scratch / "ds", "Permission denied");
    CHECK(dataset_files(scratch / "ds").empty());
  }
  SUBCASE("input not readable") {
    fs::create_directories(scratch / "open");
    fs::permissions(scratch / "open", fs::perms::all);
    fs::permissions(input, fs::perms::owner_read | fs::perms::owner_write);
    const auto result = run_as_nobody(pack_arguments(input, scratch / "open/ds"));
    check_one_line_error(*result, input, "Permission denied");
    CHECK(dataset_files(scratch / "open/ds").empty());
  }
  SUBCASE("verify of a shard that cannot be read") {
    REQUIRE(run_cli(pack_arguments(input, scratch / "ds")).exit_code == 0);
    fs::permissions(scratch / "ds/shard-00001.gcs", fs::perms::owner_read);
    const auto result = run_as_nobody({"verify", scratch / "ds"});
    INFO(result->out << result->err);
    CHECK(result->exit_code != 0);
    CHECK((result->out + result->err).find("shard-00001.gcs") != std::string::npos);
    CHECK((result->out + result->err).find("Permission denied") != std::string::npos);
  }
}
