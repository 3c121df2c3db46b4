// Helpers shared by the test suites: scratch directories, file bytes, and running the real CLI.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace test_support {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    static std::mt19937_64 random{std::random_device{}()};
    path_ = fs::temp_directory_path() /
            ("gpucache-test-" + std::to_string(::getpid()) + "-" + std::to_string(random()));
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline std::vector<char> read_bytes(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  stream.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline void flip_byte(const std::string& path, std::uint64_t offset, unsigned char mask = 0x01) {
  auto bytes = read_bytes(path);
  bytes.at(offset) = static_cast<char>(bytes.at(offset) ^ mask);
  write_bytes(path, bytes);
}

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs the gpucache binary with the given arguments through /bin/sh, capturing both streams.
inline RunResult run_cli(const std::vector<std::string>& arguments) {
  ScratchDir scratch;
  std::string command = shell_quote(GPUCACHE_CLI_PATH);
  for (const auto& argument : arguments) command += " " + shell_quote(argument);
  command +=
      " >" + shell_quote(scratch / "out") + " 2>" + shell_quote(scratch / "err") + " </dev/null";
  const int status = std::system(command.c_str());
  RunResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const auto out = read_bytes(scratch / "out");
  const auto err = read_bytes(scratch / "err");
  result.out.assign(out.begin(), out.end());
  result.err.assign(err.begin(), err.end());
  return result;
}

// Peak resident memory, in KiB, of `gpucache ARGS...` run as a child of its own (stdout to
// /dev/null); -1 when it did not exit 0. Read from the child's /proc/PID/status (VmHWM, the high
// water mark of its own address space) every few milliseconds until it exits: the rusage of a
// forked child also counts the test process's pages it held until exec, so a test process
// holding hundreds of MiB made every child look that big.
inline long peak_kib(const std::vector<std::string>& arguments) {
  std::vector<std::string> argv{GPUCACHE_CLI_PATH};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  std::vector<char*> pointers;
  for (auto& argument : argv) pointers.push_back(argument.data());
  pointers.push_back(nullptr);
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    if (std::freopen("/dev/null", "w", stdout) == nullptr) ::_exit(126);
    ::execv(pointers[0], pointers.data());
    ::_exit(127);
  }
  const std::string status_path = "/proc/" + std::to_string(child) + "/status";
  long peak = -1;
  int status = 0;
  for (;;) {
    {
      // Until the exec the child is a copy of this process ("Name:" is this test's): skipped.
      std::ifstream in(status_path);
      std::string line;
      bool exec_done = false;
      while (std::getline(in, line)) {
        if (line.rfind("Name:", 0) == 0) exec_done = line.find("gpucache") != std::string::npos;
        if (exec_done && line.rfind("VmHWM:", 0) == 0)
          peak = std::max(peak, std::atol(line.c_str() + 6));
      }
    }
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0) return -1;
    ::usleep(2000);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return peak;
}

inline std::string data_path(const std::string& relative) {
  return std::string(GPUCACHE_TEST_DATA) + "/" + relative;
}

// Sets an environment variable for one scope (this process and the CLI runs it starts), then
// puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.empty())
      ::unsetenv(name_.c_str());
    else
      ::setenv(name_.c_str(), old_.c_str(), 1);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
};

}  // namespace test_support
