#include "shard_mapping.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gpucache/common/parallel.hpp"
#include "gpucache/error.hpp"
#include "gpucache/shard/chunks.hpp"

namespace gpucache::runtime::detail {

std::shared_ptr<const ShardMapping> ShardMapping::open(const std::string& path, Access access) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path, "", std::string("cannot open: ") + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    const int saved = errno;
    ::close(fd);
    throw Error(path, "",
                S_ISDIR(info.st_mode) ? std::string("is a directory, expected a shard file")
                                      : std::string("cannot stat: ") + std::strerror(saved));
  }
  const auto size = static_cast<std::size_t>(info.st_size);
  std::byte* data = nullptr;
  if (size > 0) {
    const int protection = access == Access::copy_on_write ? PROT_READ | PROT_WRITE : PROT_READ;
    void* mapping = ::mmap(nullptr, size, protection, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      const int saved = errno;
      ::close(fd);
      throw Error(path, "", std::string("cannot map: ") + std::strerror(saved));
    }
    data = static_cast<std::byte*>(mapping);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return std::shared_ptr<const ShardMapping>(
      new ShardMapping(path, data, size, info.st_dev, info.st_ino));
}

std::shared_ptr<const ShardMapping> ShardMapping::decompress(const ShardMapping& file,
                                                             const shard::Layout& layout,
                                                             unsigned threads) {
  const auto& header = layout.header;
  const std::size_t size = static_cast<std::size_t>(header.data_offset + header.data_size);
  void* memory = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED)
    throw Error(file.path(), "",
                "cannot allocate " + std::to_string(size) +
                    " bytes to decompress the shard: " + std::strerror(errno));
  std::shared_ptr<ShardMapping> image(
      new ShardMapping(file.path(), static_cast<std::byte*>(memory), size, 0, 0));
  image->decompressed_ = true;
  const auto where = [&](std::uint64_t k) {
    return "chunk " + std::to_string(k) + " (" +
           shard::describe_range(layout, shard::chunk_range(header, k)) + ")";
  };
  std::memcpy(memory, file.data(), static_cast<std::size_t>(header.data_offset));
  gpucache::detail::parallel_for(
      header.chunk_count, threads, 1, [&](std::uint64_t begin, std::uint64_t end) {
        for (std::uint64_t k = begin; k < end; ++k) {
          const shard::ChunkEntry& chunk = layout.chunks[k];
          const shard::ByteRange logical = shard::chunk_range(header, k);
          const std::span<std::byte> out(image->data_ + logical.begin, logical.end - logical.begin);
          const std::span<const std::byte> stored(file.data() + chunk.stored_offset,
                                                  chunk.stored_size);
          if (chunk.codec == shard::Codec::raw) {
            if (stored.size() != out.size())
              throw Error(file.path(), where(k),
                          "a raw chunk's stored size is not its logical size");
            std::memcpy(out.data(), stored.data(), out.size());
          } else if (const auto cause = shard::decompress_chunk(stored, out)) {
            throw Error(file.path(), where(k), *cause);
          }
        }
      });
  return image;
}

ShardMapping::~ShardMapping() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace gpucache::runtime::detail
