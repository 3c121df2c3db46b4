#include <doctest/doctest.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gpucache/common/atomic_file.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

TEST_CASE("a file appears only once committed, with what was written at each offset") {
  test_support::ScratchDir scratch;
  const std::string path = scratch / "out";
  {
    detail::AtomicFile file(path);
    const std::vector<std::byte> tail(10, std::byte{'t'});
    file.write(std::as_bytes(std::span("head", 4)));
    file.write_zeros(6);
    file.write(tail);
    file.write_at(4, std::as_bytes(std::span("mid", 3)));
    CHECK(file.size() == 20);
    CHECK_FALSE(fs::exists(path));
  }
  CHECK_FALSE(fs::exists(path));  // destroyed without commit(): nothing is left
  detail::AtomicFile file(path);
  file.write(std::as_bytes(std::span("abc", 3)));
  file.commit();
  CHECK(test_support::read_bytes(path) == std::vector<char>{'a', 'b', 'c'});
}

TEST_CASE("pieces lying apart are written back to back, beyond what one call takes") {
  // More pieces than one pwritev takes (IOV_MAX), of uneven sizes, empty ones included.
  test_support::ScratchDir scratch;
  const std::string path = scratch / "pieces";
  std::mt19937 random(11);
  std::vector<std::vector<std::byte>> blocks(3 * IOV_MAX + 5);
  std::vector<std::span<const std::byte>> pieces;
  std::vector<char> expected(100, '\0');
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    blocks[i].resize(i % 7 == 3 ? 0 : random() % 300);
    for (auto& byte : blocks[i]) byte = static_cast<std::byte>(random() & 0xff);
    pieces.emplace_back(blocks[i]);
    for (auto byte : blocks[i]) expected.push_back(static_cast<char>(byte));
  }
  detail::AtomicFile file(path);
  file.write_zeros(100);
  file.write_pieces_at(100, pieces);
  file.write_pieces_at(expected.size(), {});  // nothing to write is fine
  file.commit();
  CHECK(test_support::read_bytes(path) == expected);
}

TEST_CASE("a flushed file is fsynced with its folder; an unflushed one is renamed without either") {
  test_support::ScratchDir scratch;
  const auto before = detail::fsync_count();
  detail::write_file_atomic(scratch / "flushed", std::string("abc"));
  CHECK(detail::fsync_count() == before + 2);  // the file, then its folder

  detail::AtomicFile file(scratch / "unflushed", detail::Durability::unflushed);
  file.write(std::as_bytes(std::span("xyz", 3)));
  file.start_writeback(0, 3);
  file.commit();
  detail::write_file_atomic(scratch / "small", std::string("s"), detail::Durability::unflushed);
  detail::sync_directory(scratch.path().string(), detail::Durability::unflushed);
  CHECK(detail::fsync_count() == before + 2);
  CHECK(test_support::read_bytes(scratch / "unflushed") == std::vector<char>{'x', 'y', 'z'});
  CHECK(test_support::read_bytes(scratch / "small") == std::vector<char>{'s'});
  CHECK_FALSE(fs::exists(scratch / "unflushed.tmp"));
}

TEST_CASE("remove_temporary_files unlinks the temporaries being written, not committed files") {
  test_support::ScratchDir scratch;
  const std::string committed = scratch / "committed.bin", open = scratch / "open.bin";
  {
    detail::AtomicFile done(committed);
    done.write(std::as_bytes(std::span("x", 1)));
    done.commit();
  }
  detail::AtomicFile writing(open);
  writing.write(std::as_bytes(std::span("y", 1)));
  REQUIRE(std::filesystem::exists(open + ".tmp"));
  // What the CLI's SIGINT/SIGTERM/SIGHUP handler does before it dies of the signal.
  detail::remove_temporary_files();
  CHECK_FALSE(std::filesystem::exists(open + ".tmp"));
  CHECK(std::filesystem::exists(committed));
}

TEST_CASE("a pack ended by SIGTERM leaves no temporary file") {
  // A pack of many rows into small shards, stopped after a moment: wherever the signal lands
  // (while a shard, the manifest or nothing is being written) no *.tmp may remain, and the
  // process dies of the signal.
  test_support::ScratchDir scratch;
  const std::string input = scratch / "rows.npy";
  {
    std::vector<float> values(std::size_t{1} << 22, 1.0f);
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 64), }";
    header.resize(118, ' ');
    header += '\n';
    std::ofstream out(input, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    const std::uint16_t length = static_cast<std::uint16_t>(header.size());
    out.write(reinterpret_cast<const char*>(&length), 2);
    out << header;
    out.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(values.size() * 4));
  }
  const std::string command =
      "exec " + test_support::shell_quote(GPUCACHE_CLI_PATH) + " pack " +
      test_support::shell_quote(input) + " -o " + test_support::shell_quote(scratch / "ds") +
      " -q --shard-rows 64 --no-checks & pid=$!; sleep 0.3; kill -TERM $pid;"
      " wait $pid; echo $?";
  const std::string wrapped = "sh -c " + test_support::shell_quote(command);
  FILE* pipe = ::popen(wrapped.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char status[32] = {};
  REQUIRE(std::fgets(status, sizeof status, pipe) != nullptr);
  ::pclose(pipe);
  INFO("exit status " << status);
  std::size_t temporaries = 0;
  if (std::filesystem::exists(scratch / "ds"))
    for (const auto& entry : std::filesystem::directory_iterator(scratch / "ds"))
      temporaries += entry.path().string().ends_with(".tmp");
  CHECK(temporaries == 0);
}
