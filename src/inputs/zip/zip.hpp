// A read-only zip container reader over a memory map, for the zip-based inputs: torch.save
// archives (.pt) and numpy archives (.npz). It trusts nothing in the file: every offset and length
// is bounds-checked, members may not overlap, and inflating is capped. See src/inputs/zip/FORMAT.md.
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

  // Reads the central directory of `file`. Throws gpucache::Error when it is not a valid zip.
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
  // size are checked. Stored members' CRCs are not checked: that would read every tensor byte.
  Storage read(const ZipMember& member) const;

 private:
  void parse();
  Storage inflate(const ZipMember& member) const;

  std::shared_ptr<const MappedFile> file_;
  Limits limits_;
  std::vector<ZipMember> members_;
  // (name, index into members_) sorted by name, the names viewing members_[i].name: a sorted
  // vector costs no allocation per member, and torch writes a member per storage.
  std::vector<std::pair<std::string_view, std::size_t>> by_name_;
};

}  // namespace gpucache::detail
