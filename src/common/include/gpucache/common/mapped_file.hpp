// A read-only memory map of a whole file. Parsers borrow spans into it; tensors read from it keep
// it alive through shared_ptr so zero-copy views never dangle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace gpucache::detail {

// Releases the pages of [begin, begin + length) if, and only if, the whole range lies inside a
// live MappedFile (never memory the process owns, where dropping pages would lose data). Returns
// whether it did.
bool release_if_mapped_file(const void* begin, std::size_t length) noexcept;

class MappedFile {
 public:
  // Maps path read-only. Throws gpucache::Error naming the file when it cannot be opened.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const noexcept { return path_; }
  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  const std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  // Hints the kernel to read ahead: the whole file is about to be read once, front to back.
  void advise_sequential() const noexcept;
  // Drops [offset, offset + length) of this mapping from the process's resident set (the page
  // cache keeps the data; the next access faults it back in), so reading a file much larger than
  // memory does not make the process look that large.
  void release(std::uint64_t offset, std::uint64_t length) const noexcept;

 private:
  MappedFile(std::string path, const std::byte* data, std::size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const std::byte* data_;
  std::size_t size_;
};

}  // namespace gpucache::detail
