// A read-only memory map of a whole file. Parsers borrow spans into it; tensors read from it keep
// it alive through shared_ptr so zero-copy views never dangle.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace gpucache::detail {

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

 private:
  MappedFile(std::string path, const std::byte* data, std::size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const std::byte* data_;
  std::size_t size_;
};

}  // namespace gpucache::detail
