// A memory map of one shard file, owned through shared_ptr so views into it never dangle.
// Host loads map copy-on-write (readable and writable, private): frameworks that cannot mark a
// tensor read-only (PyTorch) may then write to a view without crashing, and the file never
// changes. Device loads map read-only, which cudaHostRegisterReadOnly pins without copying pages.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>

namespace gpucache::shard {
struct Layout;
}

namespace gpucache::runtime::detail {

class ShardMapping {
 public:
  enum class Access { read_only, copy_on_write };
  // Throws gpucache::Error naming the file when it cannot be opened or mapped.
  static std::shared_ptr<const ShardMapping> open(const std::string& path, Access access);
  // A compressed shard (packed with --compress) as the loaders read it: private memory holding
  // the file's bytes before its data region, then the logical data image (every chunk
  // decompressed, on `threads` threads), so column offsets and chunk ranges address it as they
  // address an uncompressed shard's mapping. Chunk hashes are left to the loaders, as for a
  // mapping. Throws gpucache::Error naming the chunk whose zstd frame does not decompress.
  static std::shared_ptr<const ShardMapping> decompress(const ShardMapping& file,
                                                        const shard::Layout& layout,
                                                        unsigned threads);
  ~ShardMapping();
  ShardMapping(const ShardMapping&) = delete;
  ShardMapping& operator=(const ShardMapping&) = delete;

  const std::string& path() const noexcept { return path_; }
  const std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  // The file that was mapped, so a later mapping of the same path can check it is the same file.
  dev_t device_id() const noexcept { return device_id_; }
  ino_t inode() const noexcept { return inode_; }
  // True for decompress()'s memory: not the file's pages (they cannot be mapped again or pread).
  bool decompressed() const noexcept { return decompressed_; }

 private:
  ShardMapping(std::string path, std::byte* data, std::size_t size, dev_t device_id, ino_t inode)
      : path_(std::move(path)), data_(data), size_(size), device_id_(device_id), inode_(inode) {}
  std::string path_;
  std::byte* data_;
  std::size_t size_;
  dev_t device_id_;
  ino_t inode_;
  bool decompressed_ = false;
};

}  // namespace gpucache::runtime::detail
