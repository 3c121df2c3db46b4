// A read-only zip container reader over a memory map, for the zip-based inputs: torch.save
// archives (.pt) and numpy archives (.npz). It trusts nothing in the file: every offset and length
// is bounds-checked, members may not overlap, and inflating is capped. See
// src/inputs/zip/FORMAT.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpucache/common/mapped_file.hpp"
#include "gpucache/value.hpp"

namespace gpucache::detail {

struct ZipMember {
  // UTF-8: decoded from CP437 unless flag bit 11 says the stored name is UTF-8 (as Python's
  // zipfile decodes it, so an .npz array is named as numpy names it).
  std::string name;
  std::uint16_t method = 0;  // 0 stored, 8 deflated; anything else is refused on read
  std::uint16_t flags = 0;
  std::uint32_t crc32 = 0;
  std::uint64_t compressed_size = 0;    // from the central directory, the only trusted source
  std::uint64_t uncompressed_size = 0;  // as above
  std::uint64_t local_header_offset = 0;
  // Start of the member's bytes: after the LOCAL header's name and extra field, because torch
  // pads its storages to 64 bytes inside the local extra field only.
  std::uint64_t data_offset = 0;
};

class ZipArchive {
 public:
  struct Limits {
    // Deflate cannot expand beyond about 1032:1, so a larger claim is a lie meant to make us
    // allocate; the absolute cap bounds what one member may cost in memory.
    std::uint64_t max_inflate_ratio = 1032;
    std::uint64_t max_inflated_bytes = std::uint64_t{16} << 30;
  };

  // Reads the central directory of `file`. Throws gpucache::Error when it is not a valid zip, or
  // one Python's zipfile would read differently (FORMAT.md).
  explicit ZipArchive(std::shared_ptr<const MappedFile> file);
  ZipArchive(std::shared_ptr<const MappedFile> file, Limits limits);
  // by_name_ views the members' names: a copy would view the original's.
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;
  ZipArchive(ZipArchive&&) noexcept = default;
  ZipArchive& operator=(ZipArchive&&) noexcept = default;

  const std::string& path() const noexcept { return file_->path(); }
  const std::shared_ptr<const MappedFile>& file() const noexcept { return file_; }
  // In central-directory order.
  const std::vector<ZipMember>& members() const noexcept { return members_; }
  const ZipMember* find(std::string_view name) const;

  // The member the central directory lists first, found and located without reading the rest of
  // the directory: a caller may start on it (torch writes data.pkl first) while the archive is
  // parsed elsewhere. nullopt when the end records or that entry are not valid; parsing the
  // archive says why. Trust it only once the parsed archive agrees.
  static std::optional<ZipMember> first_member(const MappedFile& file);

  // A member's uncompressed bytes. Stored members are zero-copy views into the map (owner: the
  // MappedFile); deflated ones are inflated into a buffer the result owns, and their CRC-32 and
  // size are checked. A stored member's CRC-32 is checked by check_stored_crcs, not here: that
  // reads every byte, which a caller after the metadata only does not need.
  Storage read(const ZipMember& member) const;
  // Whether read() would hand out the member's bytes as they lie in the file: stored, and not
  // encrypted or otherwise flagged so that read() refuses it.
  static bool readable_in_place(const ZipMember& member) noexcept;
  // The first min(max_bytes, size) uncompressed bytes of a member, inflating no more than that:
  // enough to read the header of an array without its data. No CRC-32 check (it covers the
  // whole member).
  Storage read_prefix(const ZipMember& member, std::uint64_t max_bytes) const;
  // Checks the CRC-32 of each stored member among `members` (deflated ones are checked when they
  // are inflated), as Python's zipfile and torch's reader do when they read one. Windows of the
  // members are checked on up to `threads` threads and leave the resident set once read. Throws
  // for the first bad member in the order given.
  void check_stored_crcs(const std::vector<const ZipMember*>& members, unsigned threads) const;

  // Bytes inflated by every ZipArchive of the process so far (read and read_prefix): what tests
  // measure to tell a metadata-only read from a full one.
  static std::uint64_t inflated_bytes_total() noexcept;

 private:
  void parse();
  void check_readable(const ZipMember& member) const;
  Storage inflate(const ZipMember& member, std::uint64_t max_bytes) const;
  // A large whole member, inflated into the unlinked file `fd` (closed here) and mapped.
  Storage inflate_to_file(const ZipMember& member, int fd) const;

  std::shared_ptr<const MappedFile> file_;
  Limits limits_;
  std::vector<ZipMember> members_;
  // (name, index into members_) sorted by name, the names viewing members_[i].name: a sorted
  // vector costs no allocation per member, and torch writes a member per storage.
  std::vector<std::pair<std::string_view, std::size_t>> by_name_;
};

}  // namespace gpucache::detail
