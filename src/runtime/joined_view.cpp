#include "joined_view.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpucache::runtime::detail {
namespace {

std::size_t page_size() noexcept {
  static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

// Maps [offset, offset + length) of the shard's file at `at`, replacing the reservation there.
// The file is opened again by path, so it must still be the file that was mapped and verified.
bool map_part(const ShardMapping& mapping, std::uint64_t offset, std::size_t length,
              std::byte* at) noexcept {
  const int fd = ::open(mapping.path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat info {};
  bool ok = ::fstat(fd, &info) == 0 && info.st_dev == mapping.device_id() &&
            info.st_ino == mapping.inode() &&
            static_cast<std::uint64_t>(info.st_size) == mapping.size();
  // Private and writable, like the shard mappings of to_host: a write stays in this process.
  ok = ok && ::mmap(at, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd,
                    static_cast<off_t>(offset)) != MAP_FAILED;
  ::close(fd);
  return ok;
}

// True when every part but the first starts on a page and every part but the last ends on one.
bool ranges_meet_on_pages(const std::vector<ByteRange>& ranges, std::size_t page) noexcept {
  if (ranges.size() < 2) return false;
  for (std::size_t s = 0; s < ranges.size(); ++s) {
    if (ranges[s].begin >= ranges[s].end) return false;
    if (s > 0 && ranges[s].begin % page != 0) return false;
    if (s + 1 < ranges.size() && ranges[s].end % page != 0) return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<JoinedView> JoinedView::map(const std::vector<MappedShard>& shards,
                                            const std::vector<ByteRange>& ranges) {
  const std::size_t page = page_size();
  if (shards.size() != ranges.size() || !ranges_meet_on_pages(ranges, page)) return nullptr;
  const std::size_t lead = ranges.front().begin % page;
  std::size_t size = lead;
  for (const auto& range : ranges) size += range.end - range.begin;
  size = (size + page - 1) / page * page;
  // Reserve the whole range first, so the parts cannot land on anything else's memory.
  void* reserved =
      ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return nullptr;
  auto* base = static_cast<std::byte*>(reserved);
  std::unique_ptr<JoinedView> view(new JoinedView(base, size, lead));
  std::size_t cursor = 0;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const std::uint64_t offset = ranges[s].begin - (s == 0 ? lead : 0);
    const std::size_t length =
        s + 1 < shards.size() ? ranges[s].end - offset : size - cursor;  // the last part: the rest
    if (!map_part(*shards[s].file, offset, length, base + cursor)) return nullptr;
    cursor += length;
  }
  return view;
}

JoinedView::~JoinedView() {
  ::munmap(base_, size_);
}

}  // namespace gpucache::runtime::detail
