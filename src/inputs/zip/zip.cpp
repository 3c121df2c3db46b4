#include "zip/zip.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpucache/common/byte_reader.hpp"
#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/error_text.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/common/parallel.hpp"
#include "gpucache/common/utf8.hpp"
#include "gpucache/error.hpp"

namespace gpucache::detail {
namespace {

constexpr std::uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr std::uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr std::uint32_t kEndSignature = 0x06054b50;
constexpr std::uint32_t kZip64EndSignature = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr std::uint64_t kEndSize = 22;
constexpr std::uint64_t kZip64LocatorSize = 20;
constexpr std::uint64_t kZip64EndMinSize = 56;
constexpr std::uint64_t kCentralHeaderSize = 46;
constexpr std::uint64_t kLocalHeaderSize = 30;
constexpr std::uint64_t kMaxCommentSize = 0xffff;
constexpr std::uint32_t kSentinel32 = 0xffffffff;
constexpr std::uint16_t kSentinel16 = 0xffff;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
constexpr std::uint16_t kFlagEncrypted = 0x0001;
constexpr std::uint16_t kFlagPatched = 0x0020;  // "compressed patched data"
constexpr std::uint16_t kFlagStrongEncryption = 0x0040;
constexpr std::uint16_t kFlagUtf8Name = 0x0800;
constexpr unsigned kMaxExtractVersion = 63;  // Python's zipfile refuses archives needing more
constexpr std::uint64_t kCrcWindow = std::uint64_t{16} << 20;

std::atomic<std::uint64_t> inflated_total{0};

// CP437's upper half as Unicode, for names stored without the UTF-8 flag (bit 11): what
// Python's zipfile, and so numpy, decodes them as.
constexpr char16_t kCp437High[128] = {
    0x00c7, 0x00fc, 0x00e9, 0x00e2, 0x00e4, 0x00e0, 0x00e5, 0x00e7, 0x00ea, 0x00eb, 0x00e8, 0x00ef,
    0x00ee, 0x00ec, 0x00c4, 0x00c5, 0x00c9, 0x00e6, 0x00c6, 0x00f4, 0x00f6, 0x00f2, 0x00fb, 0x00f9,
    0x00ff, 0x00d6, 0x00dc, 0x00a2, 0x00a3, 0x00a5, 0x20a7, 0x0192, 0x00e1, 0x00ed, 0x00f3, 0x00fa,
    0x00f1, 0x00d1, 0x00aa, 0x00ba, 0x00bf, 0x2310, 0x00ac, 0x00bd, 0x00bc, 0x00a1, 0x00ab, 0x00bb,
    0x2591, 0x2592, 0x2593, 0x2502, 0x2524, 0x2561, 0x2562, 0x2556, 0x2555, 0x2563, 0x2551, 0x2557,
    0x255d, 0x255c, 0x255b, 0x2510, 0x2514, 0x2534, 0x252c, 0x251c, 0x2500, 0x253c, 0x255e, 0x255f,
    0x255a, 0x2554, 0x2569, 0x2566, 0x2560, 0x2550, 0x256c, 0x2567, 0x2568, 0x2564, 0x2565, 0x2559,
    0x2558, 0x2552, 0x2553, 0x256b, 0x256a, 0x2518, 0x250c, 0x2588, 0x2584, 0x258c, 0x2590, 0x2580,
    0x03b1, 0x00df, 0x0393, 0x03c0, 0x03a3, 0x03c3, 0x00b5, 0x03c4, 0x03a6, 0x0398, 0x03a9, 0x03b4,
    0x221e, 0x03c6, 0x03b5, 0x2229, 0x2261, 0x00b1, 0x2265, 0x2264, 0x2320, 0x2321, 0x00f7, 0x2248,
    0x00b0, 0x2219, 0x00b7, 0x221a, 0x00b2, 0x25a0};

// A stored name as text: UTF-8 as it is when flag bit 11 says so (refused when it is not valid,
// as Python refuses it), otherwise CP437.
std::string decode_name(std::string_view raw, std::uint16_t flags, const std::string& file,
                        std::uint64_t offset) {
  if (flags & kFlagUtf8Name) {
    if (!valid_utf8(raw))
      throw Error(file, "byte " + std::to_string(offset),
                  "member name " + escaped(raw) + " is flagged UTF-8 but is not valid UTF-8");
    return std::string(raw);
  }
  if (std::all_of(raw.begin(), raw.end(), [](char c) { return (c & 0x80) == 0; }))
    return std::string(raw);
  std::string text;
  text.reserve(raw.size() * 3);
  for (char c : raw) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x80) {
      text += c;
      continue;
    }
    const char16_t code = kCp437High[byte - 0x80];
    if (code < 0x800) {
      text += static_cast<char>(0xc0 | (code >> 6));
    } else {
      text += static_cast<char>(0xe0 | (code >> 12));
      text += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    }
    text += static_cast<char>(0x80 | (code & 0x3f));
  }
  return text;
}

std::string member_where(const ZipMember& member) {
  return "member " + escaped(member.name);
}

std::uint32_t load_u32(std::span<const std::byte> bytes, std::uint64_t at) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | std::to_integer<std::uint32_t>(bytes[at + i]);
  return value;
}

// The end record's position, found as Python's zipfile finds it: the last 22 bytes when they are
// a record without a comment, otherwise the last signature in the final 64 KiB + 22 bytes. That
// record must then be whole; a comment length running past the end is cut short, as zipfile
// cuts it (the comment is never read). The search is bounded, so a file full of signatures costs
// at most 64 KiB.
std::optional<std::uint64_t> find_end_record(std::span<const std::byte> bytes) noexcept {
  if (bytes.size() < kEndSize) return std::nullopt;
  const std::uint64_t last = bytes.size() - kEndSize;
  if (load_u32(bytes, last) == kEndSignature && bytes[bytes.size() - 1] == std::byte{0} &&
      bytes[bytes.size() - 2] == std::byte{0})
    return last;
  const std::uint64_t first = bytes.size() > kMaxCommentSize + 1 + kEndSize
                                  ? bytes.size() - kMaxCommentSize - 1 - kEndSize
                                  : 0;
  for (std::uint64_t pos = bytes.size() - 4 + 1; pos-- > first;) {
    if (load_u32(bytes, pos) != kEndSignature) continue;
    if (pos > last) return std::nullopt;  // the last signature has no room for its record
    return pos;
  }
  return std::nullopt;
}

struct Directory {
  std::uint64_t entries = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t limit = 0;  // where the directory must end: the first end record
};

Directory read_end_records(ByteReader& reader, std::span<const std::byte> bytes,
                           std::uint64_t end_pos) {
  reader.seek(end_pos + 4, "end of central directory");
  const auto disk = reader.read_le<std::uint16_t>("disk number");
  const auto directory_disk = reader.read_le<std::uint16_t>("central directory disk");
  const auto disk_entries = reader.read_le<std::uint16_t>("entries on this disk");
  const auto entries = reader.read_le<std::uint16_t>("entry count");
  const auto size = reader.read_le<std::uint32_t>("central directory size");
  const auto offset = reader.read_le<std::uint32_t>("central directory offset");

  Directory directory;
  const bool has_locator = end_pos >= kZip64LocatorSize &&
                           load_u32(bytes, end_pos - kZip64LocatorSize) == kZip64LocatorSignature;
  if (!has_locator) {
    if (disk != 0 || directory_disk != 0 || disk_entries != entries)
      reader.fail("end of central directory", "multi-disk archives are not supported");
    if (entries == kSentinel16 || size == kSentinel32 || offset == kSentinel32)
      reader.fail("end of central directory", "ZIP64 values announced but no ZIP64 locator");
    directory.entries = entries;
    directory.size = size;
    directory.offset = offset;
    directory.limit = end_pos;
    return directory;
  }

  reader.seek(end_pos - kZip64LocatorSize + 4, "ZIP64 locator");
  const auto record_disk = reader.read_le<std::uint32_t>("ZIP64 end record disk");
  const auto record_offset = reader.read_le<std::uint64_t>("ZIP64 end record offset");
  const auto disks = reader.read_le<std::uint32_t>("disk count");
  if (record_disk != 0 || disks > 1)
    reader.fail("ZIP64 locator", "multi-disk archives are not supported");
  const std::uint64_t locator_pos = end_pos - kZip64LocatorSize;
  // Python's zipfile looks for the ZIP64 end record right before the locator, whatever the
  // locator says; so must the locator, or the two readers would read different directories.
  if (locator_pos < kZip64EndMinSize || record_offset != locator_pos - kZip64EndMinSize)
    reader.fail("ZIP64 locator", "end record offset " + std::to_string(record_offset) +
                                     " is not the 56 bytes right before the locator");
  reader.seek(record_offset, "ZIP64 end record");
  if (reader.read_le<std::uint32_t>("ZIP64 end record signature") != kZip64EndSignature)
    reader.fail("ZIP64 end record", "bad signature");
  reader.read_le<std::uint64_t>("ZIP64 end record size");
  reader.read_le<std::uint16_t>("version made by");
  reader.read_le<std::uint16_t>("version needed");
  const auto disk64 = reader.read_le<std::uint32_t>("disk number");
  const auto directory_disk64 = reader.read_le<std::uint32_t>("central directory disk");
  const auto disk_entries64 = reader.read_le<std::uint64_t>("entries on this disk");
  directory.entries = reader.read_le<std::uint64_t>("entry count");
  directory.size = reader.read_le<std::uint64_t>("central directory size");
  directory.offset = reader.read_le<std::uint64_t>("central directory offset");
  if (disk64 != 0 || directory_disk64 != 0 || disk_entries64 != directory.entries)
    reader.fail("ZIP64 end record", "multi-disk archives are not supported");
  directory.limit = record_offset;
  return directory;
}

// Replaces the 32-bit sentinels of a central header with the ZIP64 extra field's values, which
// appear in a fixed order and only for the fields that hold a sentinel.
void apply_zip64_extra(const ByteReader& reader, std::span<const std::byte> extra,
                       std::uint64_t extra_offset, ZipMember& member, bool need_usize,
                       bool need_csize, bool need_offset, bool need_disk) {
  bool found = false;
  if (extra.empty()) {  // the common case, which need not copy the file name into a reader
    if (need_usize || need_csize || need_offset || need_disk)
      throw Error(reader.file(), member_where(member),
                  "central directory announces ZIP64 values but has no ZIP64 extra field");
    return;
  }
  ByteReader fields(extra, reader.file(), extra_offset);
  while (!fields.at_end()) {
    const auto id = fields.read_le<std::uint16_t>("extra field id");
    const auto length = fields.read_le<std::uint16_t>("extra field length");
    auto body = fields.take(length, "extra field");
    if (id != kZip64ExtraId || found) continue;
    found = true;
    ByteReader values(body, reader.file(), fields.file_offset() - length);
    if (need_usize) member.uncompressed_size = values.read_le<std::uint64_t>("ZIP64 size");
    if (need_csize) member.compressed_size = values.read_le<std::uint64_t>("ZIP64 compressed size");
    if (need_offset)
      member.local_header_offset = values.read_le<std::uint64_t>("ZIP64 local header offset");
    if (need_disk && values.read_le<std::uint32_t>("ZIP64 disk") != 0)
      throw Error(reader.file(), member_where(member), "multi-disk archives are not supported");
  }
  if (!found && (need_usize || need_csize || need_offset || need_disk))
    throw Error(reader.file(), member_where(member),
                "central directory announces ZIP64 values but has no ZIP64 extra field");
}

ZipMember read_central_header(ByteReader& reader) {
  const std::uint64_t start = reader.file_offset();
  if (reader.read_le<std::uint32_t>("central header signature") != kCentralHeaderSignature)
    throw Error(reader.file(), "byte " + std::to_string(start), "bad central directory signature");
  ZipMember member;
  reader.read_le<std::uint16_t>("version made by");
  const auto version_needed = reader.read_le<std::uint16_t>("version needed");
  member.flags = reader.read_le<std::uint16_t>("flags");
  member.method = reader.read_le<std::uint16_t>("method");
  reader.read_le<std::uint32_t>("modification time");
  member.crc32 = reader.read_le<std::uint32_t>("crc-32");
  const auto csize = reader.read_le<std::uint32_t>("compressed size");
  const auto usize = reader.read_le<std::uint32_t>("uncompressed size");
  const auto name_length = reader.read_le<std::uint16_t>("name length");
  const auto extra_length = reader.read_le<std::uint16_t>("extra length");
  const auto comment_length = reader.read_le<std::uint16_t>("comment length");
  const auto disk = reader.read_le<std::uint16_t>("disk number");
  reader.read_le<std::uint16_t>("internal attributes");
  reader.read_le<std::uint32_t>("external attributes");
  const auto offset = reader.read_le<std::uint32_t>("local header offset");
  const std::uint64_t name_offset = reader.file_offset();
  member.name = decode_name(reader.read_string(name_length, "member name"), member.flags,
                            reader.file(), name_offset);
  if ((version_needed & 0xff) > kMaxExtractVersion)
    throw Error(reader.file(), member_where(member),
                "needs zip version " + std::to_string((version_needed & 0xff) / 10) + "." +
                    std::to_string((version_needed & 0xff) % 10) +
                    " to extract; at most 6.3 is supported");
  const std::uint64_t extra_offset = reader.file_offset();
  auto extra = reader.take(extra_length, "extra field");
  reader.take(comment_length, "member comment");
  member.compressed_size = csize;
  member.uncompressed_size = usize;
  member.local_header_offset = offset;
  apply_zip64_extra(reader, extra, extra_offset, member, usize == kSentinel32, csize == kSentinel32,
                    offset == kSentinel32, disk == kSentinel16);
  if (disk != 0 && disk != kSentinel16)
    throw Error(reader.file(), member_where(member), "multi-disk archives are not supported");
  return member;
}

void locate_data(ByteReader& reader, ZipMember& member, std::uint64_t directory_offset) {
  // Built only for an error: this runs once per member, and torch writes one member per storage.
  const auto where = [&member] { return member_where(member); };
  if (!range_within(member.local_header_offset, kLocalHeaderSize, directory_offset))
    throw Error(reader.file(), where(),
                "local header offset " + std::to_string(member.local_header_offset) +
                    " is outside the member area (central directory starts at byte " +
                    std::to_string(directory_offset) + ")");
  reader.seek(member.local_header_offset, "local header");
  if (reader.read_le<std::uint32_t>("local header signature") != kLocalHeaderSignature)
    throw Error(reader.file(), where(),
                "bad local header signature at byte " + std::to_string(member.local_header_offset));
  reader.take(2, "local header");
  const auto local_flags = reader.read_le<std::uint16_t>("local flags");
  reader.take(18, "local header");
  const auto name_length = reader.read_le<std::uint16_t>("local name length");
  const auto extra_length = reader.read_le<std::uint16_t>("local extra length");
  const std::uint64_t name_offset = reader.file_offset();
  const std::string_view local_name = reader.read_string(name_length, "local name");
  // Compared as text, decoded by the local header's own flag, as Python's zipfile compares them.
  // ASCII names (all torch and numpy write) decode alike under either flag: no copy for them.
  const bool ascii =
      std::all_of(local_name.begin(), local_name.end(), [](char c) { return (c & 0x80) == 0; });
  const bool same_name =
      ascii ? local_name == member.name
            : decode_name(local_name, local_flags, reader.file(), name_offset) == member.name;
  if (!same_name) throw Error(reader.file(), where(), "local header names a different member");
  reader.take(extra_length, "local extra field");
  member.data_offset = reader.position();
  if (!range_within(member.data_offset, member.compressed_size, directory_offset))
    throw Error(reader.file(), where(),
                "data at byte " + std::to_string(member.data_offset) + " with " +
                    std::to_string(member.compressed_size) +
                    " bytes runs into the central directory or past the end");
  // A stored member is its first `uncompressed_size` bytes, as zipfile and torch's reader read
  // it: a larger compressed size only leaves bytes unread, a smaller one is truncated data.
  if (member.method == 0 && member.compressed_size < member.uncompressed_size)
    throw Error(reader.file(), where(),
                "stored member has compressed size " + std::to_string(member.compressed_size) +
                    " but uncompressed size " + std::to_string(member.uncompressed_size));
}

// Overlapping members are how "zip bombs" multiply one compressed stream; torch and numpy never
// write them, so any overlap is refused.
void check_no_overlap(const std::string& file, const std::vector<ZipMember>& members) {
  std::vector<const ZipMember*> order;
  order.reserve(members.size());
  for (const auto& member : members) order.push_back(&member);
  std::sort(order.begin(), order.end(), [](const ZipMember* a, const ZipMember* b) {
    return a->local_header_offset < b->local_header_offset;
  });
  for (std::size_t i = 1; i < order.size(); ++i) {
    const std::uint64_t previous_end = order[i - 1]->data_offset + order[i - 1]->compressed_size;
    if (order[i]->local_header_offset < previous_end)
      throw Error(file, member_where(*order[i]), "overlaps member " + escaped(order[i - 1]->name));
  }
}

}  // namespace

ZipArchive::ZipArchive(std::shared_ptr<const MappedFile> file)
    : ZipArchive(std::move(file), Limits{}) {}

ZipArchive::ZipArchive(std::shared_ptr<const MappedFile> file, Limits limits)
    : file_(std::move(file)), limits_(limits) {
  parse();
}

void ZipArchive::parse() {
  const auto bytes = file_->bytes();
  const auto end_pos = find_end_record(bytes);
  if (!end_pos)
    throw Error(file_->path(), "",
                "no zip end-of-central-directory record (not a zip archive, or truncated)");
  ByteReader reader(bytes, file_->path());
  const Directory directory = read_end_records(reader, bytes, *end_pos);
  if (!range_within(directory.offset, directory.size, directory.limit))
    throw Error(file_->path(), "byte " + std::to_string(*end_pos),
                "central directory at byte " + std::to_string(directory.offset) + " with " +
                    std::to_string(directory.size) + " bytes runs past the end records");
  // Python's zipfile takes a gap here for data prepended to the archive and shifts every offset
  // by it; torch and numpy never leave one, so an archive with one is refused rather than read
  // at other offsets than the reference reads it.
  if (directory.offset + directory.size != directory.limit)
    throw Error(file_->path(), "byte " + std::to_string(directory.offset + directory.size),
                std::to_string(directory.limit - directory.offset - directory.size) +
                    " bytes lie between the central directory and the end records");
  // Each entry takes at least 46 bytes, so the count is checked before anything is reserved.
  if (directory.entries > directory.size / kCentralHeaderSize)
    throw Error(file_->path(), "byte " + std::to_string(*end_pos),
                std::to_string(directory.entries) +
                    " entries cannot fit in a central directory of " +
                    std::to_string(directory.size) + " bytes");

  ByteReader central(bytes.subspan(directory.offset, directory.size), file_->path(),
                     directory.offset);
  members_.reserve(directory.entries);
  for (std::uint64_t i = 0; i < directory.entries; ++i)
    members_.push_back(read_central_header(central));
  // Python's zipfile reads entries until the directory's size is used up, torch's reader counts
  // them: both see the same members only when the entries fill the directory exactly.
  if (!central.at_end())
    throw Error(file_->path(), "byte " + std::to_string(central.file_offset()),
                std::to_string(central.remaining()) +
                    " bytes of the central directory follow its " +
                    std::to_string(directory.entries) + " entries");
  by_name_.reserve(members_.size());
  for (std::size_t i = 0; i < members_.size(); ++i) by_name_.emplace_back(members_[i].name, i);
  std::sort(by_name_.begin(), by_name_.end());
  const auto twice = std::adjacent_find(by_name_.begin(), by_name_.end(),
                                        [](auto& a, auto& b) { return a.first == b.first; });
  if (twice != by_name_.end())
    throw Error(file_->path(), "member " + escaped(twice->first),
                "appears twice in the central directory");
  for (auto& member : members_) locate_data(reader, member, directory.offset);
  check_no_overlap(file_->path(), members_);
}

std::optional<ZipMember> ZipArchive::first_member(const MappedFile& file) {
  const auto bytes = file.bytes();
  const auto end_pos = find_end_record(bytes);
  if (!end_pos) return std::nullopt;
  try {
    ByteReader reader(bytes, file.path());
    const Directory directory = read_end_records(reader, bytes, *end_pos);
    if (directory.entries == 0 || !range_within(directory.offset, directory.size, directory.limit))
      return std::nullopt;
    ByteReader central(bytes.subspan(directory.offset, directory.size), file.path(),
                       directory.offset);
    ZipMember member = read_central_header(central);
    locate_data(reader, member, directory.offset);
    return member;
  } catch (const Error&) {
    return std::nullopt;
  }
}

const ZipMember* ZipArchive::find(std::string_view name) const {
  const auto found = std::lower_bound(
      by_name_.begin(), by_name_.end(), name,
      [](const auto& entry, std::string_view wanted) { return entry.first < wanted; });
  return found != by_name_.end() && found->first == name ? &members_[found->second] : nullptr;
}

void ZipArchive::check_readable(const ZipMember& member) const {
  if (member.flags & (kFlagEncrypted | kFlagStrongEncryption))
    throw Error(file_->path(), member_where(member), "is encrypted");
  if (member.flags & kFlagPatched)
    throw Error(file_->path(), member_where(member),
                "holds compressed patched data (flag bit 5), which is not supported");
  if (member.method != 0 && member.method != 8)
    throw Error(file_->path(), member_where(member),
                "compression method " + std::to_string(member.method) +
                    " is not supported (only stored and deflated)");
}

bool ZipArchive::readable_in_place(const ZipMember& member) noexcept {
  return member.method == 0 &&
         (member.flags & (kFlagEncrypted | kFlagStrongEncryption | kFlagPatched)) == 0;
}

Storage ZipArchive::read(const ZipMember& member) const {
  check_readable(member);
  if (member.method == 0)
    return Storage{file_->bytes().subspan(member.data_offset, member.uncompressed_size), file_,
                   std::nullopt};
  return inflate(member, member.uncompressed_size);
}

Storage ZipArchive::read_prefix(const ZipMember& member, std::uint64_t max_bytes) const {
  check_readable(member);
  const std::uint64_t size = std::min(max_bytes, member.uncompressed_size);
  if (member.method == 0)
    return Storage{file_->bytes().subspan(member.data_offset, size), file_, std::nullopt};
  return inflate(member, size);
}

std::uint64_t ZipArchive::inflated_bytes_total() noexcept {
  return inflated_total.load();
}

void ZipArchive::check_stored_crcs(const std::vector<const ZipMember*>& members,
                                   unsigned threads) const {
  // Windows of at most 16 MiB: a large storage is checked on every thread, and the pages of each
  // window are released once read, so checking a file costs no resident memory.
  struct Window {
    std::size_t member;
    std::uint64_t offset, size;
    std::uint32_t crc;
  };
  std::vector<Window> windows;
  for (std::size_t m = 0; m < members.size(); ++m) {
    const ZipMember& member = *members[m];
    if (member.method != 0) continue;
    for (std::uint64_t offset = 0; offset < member.uncompressed_size; offset += kCrcWindow)
      windows.push_back({m, offset, std::min(kCrcWindow, member.uncompressed_size - offset), 0});
    if (member.uncompressed_size == 0) windows.push_back({m, 0, 0, 0});
  }
  const std::byte* base = file_->data();
  parallel_for(windows.size(), threads, 1, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t w = begin; w < end; ++w) {
      Window& window = windows[w];
      const std::byte* at = base + members[window.member]->data_offset + window.offset;
      window.crc =
          static_cast<std::uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(at), window.size));
      if (window.size > 0) release_if_mapped_file(at, window.size);
    }
  });
  std::size_t w = 0;
  while (w < windows.size()) {
    const ZipMember& member = *members[windows[w].member];
    uLong crc = windows[w].crc;
    for (++w; w < windows.size() && members[windows[w].member] == &member; ++w)
      crc = crc32_combine64(crc, windows[w].crc, static_cast<z_off64_t>(windows[w].size));
    if (crc != member.crc32)
      throw Error(file_->path(), member_where(member),
                  "CRC-32 mismatch: the stored bytes are not those the archive was written with");
  }
}

namespace {

// A whole member that inflates to this much or more goes to an unlinked file in the temporary
// folder ($TMPDIR, else /tmp), which is then mapped like an input file: its pages belong to the
// page cache, so pack drops them once read (release_if_mapped_file) instead of holding the whole
// member on the heap (a 3 MiB member of a .pt inflating to 3 GiB cost pack 3.9 GB).
constexpr std::uint64_t kSpillInflatedBytes = std::uint64_t{64} << 20;

// An unlinked file to inflate into, or -1 where the folder cannot hold one (the member then
// inflates on the heap as smaller ones do).
int unlinked_temporary() noexcept {
  const char* folder = std::getenv("TMPDIR");
  if (folder == nullptr || *folder == '\0') folder = "/tmp";
  return ::open(folder, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
}

}  // namespace

Storage ZipArchive::inflate_to_file(const ZipMember& member, int fd) const {
  const std::string where = member_where(member);
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_fd{fd};
  z_stream stream{};
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK)
    throw Error(file_->path(), where, "cannot initialise zlib");
  struct End {
    z_stream* stream;
    ~End() { inflateEnd(stream); }
  } end{&stream};
  // Inflated a window at a time, each written to the file and added to the CRC.
  std::vector<std::byte> window(std::size_t{4} << 20);
  const std::byte* in = file_->data() + member.data_offset;
  std::uint64_t in_left = member.compressed_size, written = 0;
  uLong crc = crc32_z(0, nullptr, 0);
  bool ended = false;
  while (!ended) {
    const uInt in_chunk = static_cast<uInt>(std::min<std::uint64_t>(in_left, UINT_MAX));
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in));
    stream.avail_in = in_chunk;
    stream.next_out = reinterpret_cast<Bytef*>(window.data());
    stream.avail_out = static_cast<uInt>(window.size());
    const int rc = ::inflate(&stream, Z_NO_FLUSH);
    const uInt consumed = in_chunk - stream.avail_in;
    const std::size_t produced = window.size() - stream.avail_out;
    in += consumed;
    in_left -= consumed;
    if (produced > member.uncompressed_size - written)
      throw Error(file_->path(), where,
                  "inflates to more than the " + std::to_string(member.uncompressed_size) +
                      " bytes the central directory declares");
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(window.data()), produced);
    for (std::size_t done = 0; done < produced;) {
      const ssize_t n =
          ::pwrite(fd, window.data() + done, produced - done, static_cast<off_t>(written + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        throw Error(file_->path(), where,
                    std::string("cannot write the inflated member to the temporary folder: ") +
                        std::strerror(n < 0 ? errno : EIO));
      done += static_cast<std::size_t>(n);
    }
    written += produced;
    inflated_total.fetch_add(produced, std::memory_order_relaxed);
    ended = rc == Z_STREAM_END;
    if (!ended && rc != Z_OK && rc != Z_BUF_ERROR)
      throw Error(file_->path(), where,
                  std::string("corrupt deflate data: ") + (stream.msg ? stream.msg : "zlib error"));
    if (!ended && consumed == 0 && produced == 0)
      throw Error(file_->path(), where, "deflate stream is truncated");
  }
  if (written != member.uncompressed_size)
    throw Error(file_->path(), where,
                "inflates to " + std::to_string(written) +
                    " bytes but the central directory declares " +
                    std::to_string(member.uncompressed_size));
  if (crc != member.crc32) throw Error(file_->path(), where, "CRC-32 mismatch after inflating");
  // Mapped through /proc like any input, so the mapping registry knows it; the file goes away
  // with the mapping.
  const auto mapped = MappedFile::open("/proc/self/fd/" + std::to_string(fd));
  return Storage{mapped->bytes(), mapped, std::nullopt};
}

Storage ZipArchive::inflate(const ZipMember& member, std::uint64_t max_bytes) const {
  const std::string where = member_where(member);
  const auto ratio_cap =
      checked_mul(std::max<std::uint64_t>(member.compressed_size, 1), limits_.max_inflate_ratio);
  if (member.uncompressed_size > limits_.max_inflated_bytes ||
      (ratio_cap && member.uncompressed_size > *ratio_cap))
    throw Error(file_->path(), where,
                "claims to inflate " + std::to_string(member.compressed_size) + " bytes to " +
                    std::to_string(member.uncompressed_size) +
                    ", beyond what deflate can produce or the inflate limit of " +
                    std::to_string(limits_.max_inflated_bytes) + " bytes");

  // A prefix (max_bytes below the declared size) is inflated only that far, and unchecked: its
  // CRC-32 and size cover the whole member.
  const bool whole = max_bytes >= member.uncompressed_size;
  if (whole && member.uncompressed_size >= kSpillInflatedBytes)
    if (const int fd = unlinked_temporary(); fd >= 0) return inflate_to_file(member, fd);
  auto buffer =
      std::make_shared<std::vector<std::byte>>(whole ? member.uncompressed_size : max_bytes);
  z_stream stream{};
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK)
    throw Error(file_->path(), where, "cannot initialise zlib");
  struct End {
    z_stream* stream;
    ~End() { inflateEnd(stream); }
  } end{&stream};

  const std::byte* in = file_->data() + member.data_offset;
  std::uint64_t in_left = member.compressed_size;
  std::byte* out = buffer->data();
  std::uint64_t out_left = buffer->size();
  Bytef overflow_probe = 0;
  for (;;) {
    if (!whole && out_left == 0) break;
    const uInt in_chunk = static_cast<uInt>(std::min<std::uint64_t>(in_left, UINT_MAX));
    // Once the buffer is full, a one-byte probe detects data beyond the declared size.
    const bool probing = out_left == 0;
    const uInt out_chunk =
        probing ? 1 : static_cast<uInt>(std::min<std::uint64_t>(out_left, UINT_MAX));
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in));
    stream.avail_in = in_chunk;
    stream.next_out = probing ? &overflow_probe : reinterpret_cast<Bytef*>(out);
    stream.avail_out = out_chunk;
    const int rc = ::inflate(&stream, Z_NO_FLUSH);
    const uInt consumed = in_chunk - stream.avail_in;
    const uInt produced = out_chunk - stream.avail_out;
    in += consumed;
    in_left -= consumed;
    if (probing && produced > 0)
      throw Error(file_->path(), where,
                  "inflates to more than the " + std::to_string(member.uncompressed_size) +
                      " bytes the central directory declares");
    out += produced;
    out_left -= produced;
    inflated_total.fetch_add(produced, std::memory_order_relaxed);
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && rc != Z_BUF_ERROR)
      throw Error(file_->path(), where,
                  std::string("corrupt deflate data: ") + (stream.msg ? stream.msg : "zlib error"));
    if (consumed == 0 && produced == 0)
      throw Error(file_->path(), where, "deflate stream is truncated");
  }
  if (out_left != 0)
    throw Error(file_->path(), where,
                "inflates to " + std::to_string(buffer->size() - out_left) +
                    " bytes but the central directory declares " +
                    std::to_string(member.uncompressed_size));
  const std::span<const std::byte> inflated(buffer->data(), buffer->size());
  if (!whole) return Storage{inflated, buffer, std::nullopt};
  const auto crc = crc32_z(0, reinterpret_cast<const Bytef*>(buffer->data()), buffer->size());
  if (crc != member.crc32) throw Error(file_->path(), where, "CRC-32 mismatch after inflating");
  return Storage{inflated, buffer, std::nullopt};
}

}  // namespace gpucache::detail
