// The zip container reader on archives built byte by byte here (so every field can be set or
// broken on purpose) and on the real torch and numpy archives in tests/data.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "gpucache/error.hpp"
#include "zip/zip.hpp"

using namespace gpucache;
using namespace gpucache::detail;
namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(GPUCACHE_TEST_DATA);

struct Entry {
  std::string name;
  std::string data;
  bool deflate = false;
  std::string local_extra;
  std::uint16_t flags = 0;
  std::optional<std::uint16_t> method;  // overrides the method written
  std::optional<std::uint32_t> crc;
  std::optional<std::uint64_t> csize, usize, offset;  // central directory overrides
  std::optional<std::string> local_name;
};

struct Archive {
  std::vector<Entry> entries;
  bool zip64 = false;
  std::string comment;
  std::optional<std::uint64_t> entry_count, directory_offset, directory_size;
  std::uint16_t disk = 0;
  std::string junk_before_directory;
};

void put(std::string& out, std::uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::string raw_deflate(const std::string& data) {
  z_stream stream{};
  REQUIRE(deflateInit2(&stream, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&stream, data.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&stream, Z_FINISH) == Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

std::string build(const Archive& archive) {
  std::string out;
  std::vector<std::uint64_t> offsets;
  std::vector<std::string> payloads;
  for (const auto& entry : archive.entries) {
    const std::string payload = entry.deflate ? raw_deflate(entry.data) : entry.data;
    const std::string& local_name = entry.local_name ? *entry.local_name : entry.name;
    offsets.push_back(out.size());
    payloads.push_back(payload);
    put(out, 0x04034b50, 4);
    put(out, 20, 2);
    put(out, entry.flags, 2);
    put(out, entry.method.value_or(entry.deflate ? 8 : 0), 2);
    put(out, 0, 4);
    put(out, 0, 4);  // crc, sizes: left zero as torch does (it writes them in data descriptors)
    put(out, 0, 4);
    put(out, 0, 4);
    put(out, local_name.size(), 2);
    put(out, entry.local_extra.size(), 2);
    out += local_name + entry.local_extra + payload;
  }
  out += archive.junk_before_directory;
  const std::uint64_t directory_start = out.size();
  for (std::size_t i = 0; i < archive.entries.size(); ++i) {
    const auto& entry = archive.entries[i];
    const std::uint64_t csize = entry.csize.value_or(payloads[i].size());
    const std::uint64_t usize = entry.usize.value_or(entry.data.size());
    const std::uint64_t offset = entry.offset.value_or(offsets[i]);
    std::string extra;
    if (archive.zip64) {
      put(extra, 1, 2);
      put(extra, 24, 2);
      put(extra, usize, 8);
      put(extra, csize, 8);
      put(extra, offset, 8);
    }
    put(out, 0x02014b50, 4);
    put(out, 20, 2);
    put(out, 45, 2);
    put(out, entry.flags, 2);
    put(out, entry.method.value_or(entry.deflate ? 8 : 0), 2);
    put(out, 0, 4);
    put(out,
        entry.crc.value_or(crc32(0, reinterpret_cast<const Bytef*>(entry.data.data()),
                                 static_cast<uInt>(entry.data.size()))),
        4);
    put(out, archive.zip64 ? 0xffffffff : csize, 4);
    put(out, archive.zip64 ? 0xffffffff : usize, 4);
    put(out, entry.name.size(), 2);
    put(out, extra.size(), 2);
    put(out, 0, 2);
    put(out, 0, 2);
    put(out, 0, 2);
    put(out, 0, 4);
    put(out, archive.zip64 ? 0xffffffff : offset, 4);
    out += entry.name + extra;
  }
  const std::uint64_t directory_size =
      archive.directory_size.value_or(out.size() - directory_start);
  const std::uint64_t directory_offset = archive.directory_offset.value_or(directory_start);
  const std::uint64_t count = archive.entry_count.value_or(archive.entries.size());
  if (archive.zip64) {
    const std::uint64_t record = out.size();
    put(out, 0x06064b50, 4);
    put(out, 44, 8);
    put(out, 45, 2);
    put(out, 45, 2);
    put(out, archive.disk, 4);
    put(out, 0, 4);
    put(out, count, 8);
    put(out, count, 8);
    put(out, directory_size, 8);
    put(out, directory_offset, 8);
    put(out, 0x07064b50, 4);
    put(out, 0, 4);
    put(out, record, 8);
    put(out, 1, 4);
  }
  put(out, 0x06054b50, 4);
  put(out, archive.zip64 ? 0 : archive.disk, 2);
  put(out, 0, 2);
  put(out, archive.zip64 ? 0xffff : count, 2);
  put(out, archive.zip64 ? 0xffff : count, 2);
  put(out, archive.zip64 ? 0xffffffff : directory_size, 4);
  put(out, archive.zip64 ? 0xffffffff : directory_offset, 4);
  put(out, archive.comment.size(), 2);
  return out + archive.comment;
}

fs::path write_temp(const std::string& bytes) {
  static int counter = 0;
  const fs::path path =
      fs::temp_directory_path() /
      ("gpucache_test_zip_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

ZipArchive open_bytes(const std::string& bytes) {
  const fs::path path = write_temp(bytes);
  auto file = MappedFile::open(path.string());
  fs::remove(path);  // the mapping stays valid
  return ZipArchive(file);
}

std::string error_of(const std::string& bytes) {
  try {
    open_bytes(bytes);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

std::string read_error(const Archive& archive, const std::string& name) {
  try {
    const ZipArchive zip = open_bytes(build(archive));
    zip.read(*zip.find(name));
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

std::string text(const Storage& storage) {
  return {reinterpret_cast<const char*>(storage.bytes.data()), storage.bytes.size()};
}

bool contains(const std::string& message, const std::string& part) {
  const bool found = message.find(part) != std::string::npos;
  if (!found) MESSAGE("message was: " << message);
  return found;
}

Archive sample() {
  Archive archive;
  // 40 bytes of local padding after a 30 + 10 byte header puts the data at offset 80.
  archive.entries.push_back({"archive/a", "stored bytes", false, std::string(40, '\0')});
  archive.entries.push_back({"archive/b", std::string(5000, 'z') + "tail", true});
  archive.entries.push_back({"archive/empty", ""});
  return archive;
}

void check_sample(const ZipArchive& zip) {
  REQUIRE(zip.members().size() == 3);
  const ZipMember* a = zip.find("archive/a");
  REQUIRE(a != nullptr);
  CHECK(a->data_offset == 30 + 9 + 40);  // from the LOCAL header's name and extra lengths
  const Storage stored = zip.read(*a);
  CHECK(text(stored) == "stored bytes");
  const auto* base = zip.file()->data();
  CHECK(stored.bytes.data() == base + a->data_offset);  // zero-copy
  CHECK(stored.owner == zip.file());
  const ZipMember* b = zip.find("archive/b");
  REQUIRE(b != nullptr);
  CHECK(b->method == 8);
  CHECK(b->compressed_size < b->uncompressed_size);
  const Storage inflated = zip.read(*b);
  CHECK(text(inflated) == std::string(5000, 'z') + "tail");
  CHECK(inflated.owner != zip.file());
  CHECK(zip.read(*zip.find("archive/empty")).bytes.empty());
  CHECK(zip.find("archive/missing") == nullptr);
}

}  // namespace

TEST_CASE("stored and deflated members, offsets from the local header") {
  check_sample(open_bytes(build(sample())));
}

TEST_CASE("ZIP64 end records and extra fields") {
  Archive archive = sample();
  archive.zip64 = true;
  check_sample(open_bytes(build(archive)));
}

TEST_CASE("an archive comment is skipped") {
  Archive archive = sample();
  archive.comment = "a comment of some length";
  check_sample(open_bytes(build(archive)));
}

TEST_CASE("real torch and numpy archives") {
  const auto torch_file = MappedFile::open((kData / "pt" / "dtypes.pt").string());
  const ZipArchive torch_zip(torch_file);
  const ZipMember* pickle = torch_zip.find("dtypes/data.pkl");
  REQUIRE(pickle != nullptr);
  const Storage pickle_bytes = torch_zip.read(*pickle);
  CHECK(pickle_bytes.bytes[0] == std::byte{0x80});
  std::size_t storages = 0;
  for (const auto& member : torch_zip.members()) {
    CHECK(member.method == 0);
    if (member.name.find("/data/") != std::string::npos) {
      CHECK(member.data_offset % 64 == 0);  // torch's alignment padding, in the local extra field
      ++storages;
    }
  }
  CHECK(storages == 10);

  const ZipArchive npz(MappedFile::open((kData / "npz" / "deflated.npz").string()));
  REQUIRE(!npz.members().empty());
  for (const auto& member : npz.members()) {
    CHECK(member.method == 8);
    CHECK(npz.read(member).bytes.size() == member.uncompressed_size);  // inflated, CRC checked
  }
}

TEST_CASE("structural errors name the file and what is wrong") {
  CHECK(contains(error_of(""), "no zip end-of-central-directory record"));
  CHECK(contains(error_of(std::string(100000, 'x')), "no zip end-of-central-directory record"));
  const std::string good = build(sample());
  CHECK(contains(error_of(good.substr(0, good.size() - 1)),
                 "no zip end-of-central-directory record"));
  CHECK(contains(error_of(good.substr(good.size() / 2)), "runs past the end records"));

  Archive absurd = sample();
  absurd.entry_count = 60000;
  CHECK(contains(error_of(build(absurd)), "60000 entries cannot fit in a central directory"));
  Archive past = sample();
  past.directory_offset = 1u << 30;
  CHECK(contains(error_of(build(past)), "central directory at byte 1073741824"));
  Archive empty;  // no members at all is a valid archive
  CHECK(open_bytes(build(empty)).members().empty());
  Archive disks = sample();
  disks.disk = 1;
  CHECK(contains(error_of(build(disks)), "multi-disk archives are not supported"));
  disks.zip64 = true;
  CHECK(contains(error_of(build(disks)), "multi-disk archives are not supported"));
  std::string bad_signature = build(sample());
  bad_signature[bad_signature.find("PK\1\2")] = 'Q';
  CHECK(contains(error_of(bad_signature), "bad central directory signature"));

  Archive offset = sample();
  offset.entries[1].offset = 1u << 31;
  CHECK(contains(error_of(build(offset)),
                 "member archive/b: local header offset 2147483648 is outside"));
  offset.entries[1].offset = 5;
  CHECK(
      contains(error_of(build(offset)), "member archive/b: bad local header signature at byte 5"));
  Archive renamed = sample();
  renamed.entries[0].local_name = "archive/x";
  CHECK(contains(error_of(build(renamed)),
                 "member archive/a: local header names a different member"));
  Archive long_data = sample();
  long_data.entries[2].csize = 1000;
  long_data.entries[2].usize = 1000;
  CHECK(contains(error_of(build(long_data)), "runs into the central directory or past the end"));
  Archive huge = sample();
  huge.zip64 = true;
  huge.entries[0].csize = ~std::uint64_t{0};
  huge.entries[0].usize = ~std::uint64_t{0};
  CHECK(contains(error_of(build(huge)), "runs into the central directory or past the end"));
  // A stored member is its first uncompressed_size bytes (as zipfile reads it); fewer bytes
  // stored than that is truncated data.
  Archive shorter = sample();
  shorter.entries[0].usize = 3;
  {
    const ZipArchive zip = open_bytes(build(shorter));
    CHECK(text(zip.read(*zip.find("archive/a"))) == "sto");
  }
  Archive mismatch = sample();
  mismatch.entries[0].usize = 20;
  CHECK(contains(error_of(build(mismatch)),
                 "stored member has compressed size 12 but uncompressed size 20"));
  Archive twice = sample();
  twice.entries[2].name = "archive/a";
  twice.entries[2].local_name = "archive/a";
  CHECK(
      contains(error_of(build(twice)), "member archive/a: appears twice in the central directory"));
  Archive overlap = sample();
  overlap.entries[0].csize = 60;  // reaches into the next member's local header
  overlap.entries[0].usize = 60;
  CHECK(contains(error_of(build(overlap)), "member archive/b: overlaps member archive/a"));
  Archive same_header = sample();  // a second name for the first member's bytes
  same_header.entries[2].offset = 0;
  CHECK(contains(error_of(build(same_header)),
                 "member archive/empty: local header names a different member"));
}

TEST_CASE("ZIP64 sentinels without their extra field are refused") {
  Archive archive = sample();
  archive.zip64 = true;
  std::string bytes = build(archive);
  // Rename the first central header's ZIP64 extra field id (0x0001) to an unknown id.
  const auto at = bytes.find(std::string("\x01\x00\x18\x00", 4));
  REQUIRE(at != std::string::npos);
  bytes[at] = 0x7f;
  CHECK(contains(error_of(bytes), "announces ZIP64 values but has no ZIP64 extra field"));
  // An end record with sentinels but no ZIP64 locator.
  std::string no_locator = build(sample());
  const auto end = no_locator.size() - 22;
  for (int i = 8; i < 12; ++i) no_locator[end + i] = '\xff';
  CHECK(contains(error_of(no_locator), "ZIP64 values announced but no ZIP64 locator"));
  // A locator pointing past itself.
  std::string bad_locator = build(archive);
  const auto locator = bad_locator.size() - 22 - 20;
  for (int i = 8; i < 16; ++i) bad_locator[locator + i] = '\x7f';
  CHECK(contains(error_of(bad_locator), "is not the 56 bytes right before the locator"));
}

TEST_CASE("reading members: methods, encryption, sizes, CRC and corrupt streams") {
  Archive encrypted = sample();
  encrypted.entries[0].flags = 1;
  CHECK(contains(read_error(encrypted, "archive/a"), "member archive/a: is encrypted"));
  Archive bzip2 = sample();
  bzip2.entries[0].method = 12;
  CHECK(contains(read_error(bzip2, "archive/a"), "compression method 12 is not supported"));
  Archive bigger = sample();
  bigger.entries[1].usize = 6000;
  CHECK(contains(read_error(bigger, "archive/b"),
                 "inflates to 5004 bytes but the central directory declares 6000"));
  Archive smaller = sample();
  smaller.entries[1].usize = 100;
  CHECK(contains(read_error(smaller, "archive/b"), "inflates to more than the 100 bytes"));
  Archive crc = sample();
  crc.entries[1].crc = 1234;
  CHECK(contains(read_error(crc, "archive/b"), "CRC-32 mismatch after inflating"));
  Archive bomb = sample();
  bomb.entries[1].usize = std::uint64_t{1} << 40;
  bomb.zip64 = true;
  CHECK(contains(read_error(bomb, "archive/b"), "beyond what deflate can produce"));
  Archive corrupt;
  corrupt.entries.push_back({"x", "not deflate data", false});
  corrupt.entries[0].method = 8;
  CHECK(contains(read_error(corrupt, "x"), "corrupt deflate data"));
  // The declared size is right but the deflate stream stops halfway.
  Archive truncated;
  truncated.entries.push_back({"x", "", false});
  const std::string stream = raw_deflate(std::string(3000, 'q'));
  truncated.entries[0].data = stream.substr(0, stream.size() / 2);
  truncated.entries[0].method = 8;
  truncated.entries[0].usize = 3000;
  CHECK(contains(read_error(truncated, "x"), "deflate stream is truncated"));
}

TEST_CASE("inflate limits are configurable") {
  ZipArchive::Limits limits;
  limits.max_inflated_bytes = 1000;
  const fs::path path = write_temp(build(sample()));
  const ZipArchive zip(MappedFile::open(path.string()), limits);
  fs::remove(path);
  CHECK_THROWS_WITH_AS(zip.read(*zip.find("archive/b")),
                       doctest::Contains("the inflate limit of 1000 bytes"), Error);
  CHECK(text(zip.read(*zip.find("archive/a"))) == "stored bytes");
}

TEST_CASE("the first member is found and located without the rest of the directory") {
  auto first_of = [](const std::string& bytes) {
    const fs::path path = write_temp(bytes);
    auto file = MappedFile::open(path.string());
    fs::remove(path);
    return ZipArchive::first_member(*file);
  };
  for (bool zip64 : {false, true}) {
    Archive archive = sample();
    archive.zip64 = zip64;
    const auto first = first_of(build(archive));
    REQUIRE(first.has_value());
    CHECK(first->name == "archive/a");
    CHECK(first->data_offset == 30 + 9 + 40);
    CHECK(first->compressed_size == 12);
  }
  // What the full parse refuses is never handed out: nothing at all, or a first entry whose local
  // header is elsewhere, names another member, or whose data runs past the directory.
  CHECK_FALSE(first_of("not a zip archive").has_value());
  CHECK_FALSE(first_of(build(Archive{})).has_value());
  Archive moved = sample();
  moved.entries[0].offset = 7;
  CHECK_FALSE(first_of(build(moved)).has_value());
  Archive renamed = sample();
  renamed.entries[0].local_name = "archive/z";
  CHECK_FALSE(first_of(build(renamed)).has_value());
  Archive long_data = sample();
  long_data.entries[0].csize = 1 << 20;
  CHECK_FALSE(first_of(build(long_data)).has_value());
  // A later entry's damage is the full parse's to find.
  Archive later = sample();
  later.entries[1].offset = 7;
  CHECK(first_of(build(later)).has_value());
  CHECK(contains(error_of(build(later)), "member archive/b"));
}
