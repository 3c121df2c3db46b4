#include "zip/zip.hpp"

#include <zlib.h>

#include <algorithm>
#include <climits>

#include "gpucache/common/byte_reader.hpp"
#include "gpucache/common/checked_math.hpp"
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

std::uint32_t load_u32(std::span<const std::byte> bytes, std::uint64_t at) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | std::to_integer<std::uint32_t>(bytes[at + i]);
  return value;
}

// The end record's position: the last signature in the final 64 KiB + 22 bytes whose comment
// fits in the file. The search is bounded, so a file full of signatures costs at most 64 KiB.
std::optional<std::uint64_t> find_end_record(std::span<const std::byte> bytes) noexcept {
  if (bytes.size() < kEndSize) return std::nullopt;
  const std::uint64_t last = bytes.size() - kEndSize;
  const std::uint64_t first = last > kMaxCommentSize ? last - kMaxCommentSize : 0;
  for (std::uint64_t pos = last + 1; pos-- > first;) {
    if (load_u32(bytes, pos) != kEndSignature) continue;
    const std::uint64_t comment = std::to_integer<std::uint64_t>(bytes[pos + 20]) |
                                  std::to_integer<std::uint64_t>(bytes[pos + 21]) << 8;
    if (pos + kEndSize + comment <= bytes.size()) return pos;
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
  if (!range_within(record_offset, kZip64EndMinSize, locator_pos))
    reader.fail("ZIP64 locator", "end record offset " + std::to_string(record_offset) +
                                     " does not leave room before the locator");
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
      throw Error(reader.file(), "member " + member.name,
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
      throw Error(reader.file(), "member " + member.name, "multi-disk archives are not supported");
  }
  if (!found && (need_usize || need_csize || need_offset || need_disk))
    throw Error(reader.file(), "member " + member.name,
                "central directory announces ZIP64 values but has no ZIP64 extra field");
}

ZipMember read_central_header(ByteReader& reader) {
  const std::uint64_t start = reader.file_offset();
  if (reader.read_le<std::uint32_t>("central header signature") != kCentralHeaderSignature)
    throw Error(reader.file(), "byte " + std::to_string(start), "bad central directory signature");
  ZipMember member;
  reader.read_le<std::uint16_t>("version made by");
  reader.read_le<std::uint16_t>("version needed");
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
  member.name = std::string(reader.read_string(name_length, "member name"));
  const std::uint64_t extra_offset = reader.file_offset();
  auto extra = reader.take(extra_length, "extra field");
  reader.take(comment_length, "member comment");
  member.compressed_size = csize;
  member.uncompressed_size = usize;
  member.local_header_offset = offset;
  apply_zip64_extra(reader, extra, extra_offset, member, usize == kSentinel32, csize == kSentinel32,
                    offset == kSentinel32, disk == kSentinel16);
  if (disk != 0 && disk != kSentinel16)
    throw Error(reader.file(), "member " + member.name, "multi-disk archives are not supported");
  return member;
}

void locate_data(ByteReader& reader, ZipMember& member, std::uint64_t directory_offset) {
  // Built only for an error: this runs once per member, and torch writes one member per storage.
  const auto where = [&member] { return "member " + member.name; };
  if (!range_within(member.local_header_offset, kLocalHeaderSize, directory_offset))
    throw Error(reader.file(), where(),
                "local header offset " + std::to_string(member.local_header_offset) +
                    " is outside the member area (central directory starts at byte " +
                    std::to_string(directory_offset) + ")");
  reader.seek(member.local_header_offset, "local header");
  if (reader.read_le<std::uint32_t>("local header signature") != kLocalHeaderSignature)
    throw Error(reader.file(), where(),
                "bad local header signature at byte " + std::to_string(member.local_header_offset));
  reader.take(22, "local header");
  const auto name_length = reader.read_le<std::uint16_t>("local name length");
  const auto extra_length = reader.read_le<std::uint16_t>("local extra length");
  if (reader.read_string(name_length, "local name") != member.name)
    throw Error(reader.file(), where(), "local header names a different member");
  reader.take(extra_length, "local extra field");
  member.data_offset = reader.position();
  if (!range_within(member.data_offset, member.compressed_size, directory_offset))
    throw Error(reader.file(), where(),
                "data at byte " + std::to_string(member.data_offset) + " with " +
                    std::to_string(member.compressed_size) +
                    " bytes runs into the central directory or past the end");
  if (member.method == 0 && member.compressed_size != member.uncompressed_size)
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
      throw Error(file, "member " + order[i]->name, "overlaps member " + order[i - 1]->name);
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
  by_name_.reserve(members_.size());
  for (std::size_t i = 0; i < members_.size(); ++i) by_name_.emplace_back(members_[i].name, i);
  std::sort(by_name_.begin(), by_name_.end());
  const auto twice = std::adjacent_find(by_name_.begin(), by_name_.end(),
                                        [](auto& a, auto& b) { return a.first == b.first; });
  if (twice != by_name_.end())
    throw Error(file_->path(), "member " + std::string(twice->first),
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

Storage ZipArchive::read(const ZipMember& member) const {
  if (member.flags & kFlagEncrypted)
    throw Error(file_->path(), "member " + member.name, "is encrypted");
  if (member.method == 0)
    return Storage{file_->bytes().subspan(member.data_offset, member.compressed_size), file_};
  if (member.method == 8) return inflate(member);
  throw Error(file_->path(), "member " + member.name,
              "compression method " + std::to_string(member.method) +
                  " is not supported (only stored and deflated)");
}

Storage ZipArchive::inflate(const ZipMember& member) const {
  const std::string where = "member " + member.name;
  const auto ratio_cap =
      checked_mul(std::max<std::uint64_t>(member.compressed_size, 1), limits_.max_inflate_ratio);
  if (member.uncompressed_size > limits_.max_inflated_bytes ||
      (ratio_cap && member.uncompressed_size > *ratio_cap))
    throw Error(file_->path(), where,
                "claims to inflate " + std::to_string(member.compressed_size) + " bytes to " +
                    std::to_string(member.uncompressed_size) +
                    ", beyond what deflate can produce or the inflate limit of " +
                    std::to_string(limits_.max_inflated_bytes) + " bytes");

  auto buffer = std::make_shared<std::vector<std::byte>>(member.uncompressed_size);
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
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && rc != Z_BUF_ERROR)
      throw Error(file_->path(), where,
                  std::string("corrupt deflate data: ") + (stream.msg ? stream.msg : "zlib error"));
    if (consumed == 0 && produced == 0)
      throw Error(file_->path(), where, "deflate stream is truncated");
  }
  if (out_left != 0)
    throw Error(file_->path(), where,
                "inflates to " + std::to_string(member.uncompressed_size - out_left) +
                    " bytes but the central directory declares " +
                    std::to_string(member.uncompressed_size));
  const auto crc = crc32_z(0, reinterpret_cast<const Bytef*>(buffer->data()), buffer->size());
  if (crc != member.crc32) throw Error(file_->path(), where, "CRC-32 mismatch after inflating");
  return Storage{std::span<const std::byte>(buffer->data(), buffer->size()), buffer};
}

}  // namespace gpucache::detail
