// Helpers shared by the test suites: scratch directories, file bytes, and running the real CLI.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

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

inline std::string data_path(const std::string& relative) {
  return std::string(GPUCACHE_TEST_DATA) + "/" + relative;
}

}  // namespace test_support
