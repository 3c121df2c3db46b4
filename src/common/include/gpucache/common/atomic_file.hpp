// Output files that appear complete or not at all: data goes to "<path>.tmp", is fsynced, and is
// renamed over <path> only by commit(). A writer destroyed without commit() removes its temporary,
// so an error or exception never leaves a partial file under the final name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace gpucache::detail {

// What commit() promises once it returns. `flushed`: the file's data and its name are on disk
// (fsync of the file, then of its folder), so even a power failure leaves the old file or the
// whole new one. `unflushed` (pack --no-fsync): the kernel writes the data back when it likes;
// every process still sees the old file or the whole new one (the rename is atomic), but a power
// failure soon after may leave the new name on an empty or short file. Saves the time the disk
// takes to absorb the data, which for a large copy is most of the time.
enum class Durability { flushed, unflushed };
// The durability an `fsync` option (true unless --no-fsync) asks for.
constexpr Durability durability_for(bool fsync) noexcept {
  return fsync ? Durability::flushed : Durability::unflushed;
}

class AtomicFile {
 public:
  explicit AtomicFile(std::string path, Durability durability = Durability::flushed);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends bytes; throws gpucache::Error naming the file and the cause (ENOSPC, EACCES, ...).
  void write(std::span<const std::byte> bytes);
  void write_zeros(std::size_t count);
  // Sets the file's size to `size` with its blocks allocated (fallocate), so a shared mapping of it
  // can be filled without the file system running out of space mid-write (which would be SIGBUS,
  // not an error). Returns false where the file system cannot preallocate; throws on ENOSPC.
  bool preallocate(std::uint64_t size);
  // Writes bytes at an offset (pwrite), leaving size() alone.
  void write_at(std::uint64_t offset, std::span<const std::byte> bytes);
  // Writes the pieces back to back from `offset` (pwritev: one call for up to IOV_MAX pieces, so
  // scattered rows need no gathering copy first), leaving size() alone.
  void write_pieces_at(std::uint64_t offset, std::span<const std::span<const std::byte>> pieces);
  // Starts writing a range back to disk without waiting (sync_file_range), so commit()'s fsync
  // finds less to do. A hint: errors surface at commit(). Does nothing for an unflushed file.
  void start_writeback(std::uint64_t offset, std::uint64_t size) noexcept;
  int descriptor() const noexcept { return fd_; }
  std::uint64_t size() const noexcept { return written_; }
  // fsync (when flushed), rename into place, fsync the directory (when flushed).
  void commit();
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  std::string temporary_path_;
  Durability durability_;
  int fd_ = -1;
  std::uint64_t written_ = 0;
  int slot_ = -1;  // its entry in the list remove_temporary_files() reads; -1 when unlisted
};

// Unlinks the "<path>.tmp" of every AtomicFile not yet committed or destroyed. Async-signal-safe
// (atomic loads and unlink only): the CLI calls it when SIGINT, SIGTERM or SIGHUP ends it, so a
// pack stopped that way leaves no temporary behind. (SIGKILL cannot be caught: the next pack
// into the folder removes what it leaves.)
void remove_temporary_files() noexcept;

// Writes a whole small file atomically.
void write_file_atomic(const std::string& path, std::span<const std::byte> bytes,
                       Durability durability = Durability::flushed);
void write_file_atomic(const std::string& path, const std::string& text,
                       Durability durability = Durability::flushed);
// fsyncs a file written by other means (a copy) so its data survives a crash (nothing when
// unflushed); throws gpucache::Error naming the file when it cannot.
void sync_file(const std::string& path, Durability durability = Durability::flushed);
// fsyncs a directory so a rename inside it survives a crash (nothing when unflushed).
void sync_directory(const std::string& directory, Durability durability = Durability::flushed);
// How many files and folders this process has fsynced: lets tests check what --no-fsync skips.
std::uint64_t fsync_count() noexcept;

}  // namespace gpucache::detail
