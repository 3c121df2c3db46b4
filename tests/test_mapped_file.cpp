#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "gpucache/common/mapped_file.hpp"
#include "gpucache/error.hpp"
#include "test_support.hpp"

using namespace gpucache;

TEST_CASE("a mapped file's pages can be released and read again unchanged") {
  test_support::ScratchDir scratch;
  std::vector<char> bytes(3 * 4096 + 123);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  test_support::write_bytes(scratch / "f", bytes);
  const auto file = detail::MappedFile::open(scratch / "f");
  REQUIRE(file->size() == bytes.size());
  CHECK(detail::release_if_mapped_file(file->data() + 100, 5000));
  file->release(0, file->size());
  CHECK(std::memcmp(file->data(), bytes.data(), bytes.size()) == 0);
}

TEST_CASE("memory the process owns is never released, nor a range running past a mapping") {
  std::vector<std::byte> owned(1 << 16, std::byte{42});
  CHECK_FALSE(detail::release_if_mapped_file(owned.data(), owned.size()));
  CHECK(owned[12345] == std::byte{42});
  test_support::ScratchDir scratch;
  test_support::write_bytes(scratch / "f", std::vector<char>(8192, 'x'));
  const auto file = detail::MappedFile::open(scratch / "f");
  CHECK_FALSE(detail::release_if_mapped_file(file->data() + 4096, 8192));
}

TEST_CASE("opening a missing file or a directory is an error naming it") {
  test_support::ScratchDir scratch;
  CHECK_THROWS_WITH_AS(detail::MappedFile::open(scratch / "nope"), doctest::Contains("nope"),
                       Error);
  CHECK_THROWS_WITH_AS(detail::MappedFile::open(scratch.path().string()),
                       doctest::Contains("directory"), Error);
}
