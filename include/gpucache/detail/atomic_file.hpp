// Output files that appear complete or not at all: data goes to "<path>.tmp", is fsynced, and is
// renamed over <path> only by commit(). A writer destroyed without commit() removes its temporary,
// so an error or exception never leaves a partial file under the final name.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace gpucache::detail {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends bytes; throws gpucache::Error naming the file and the cause (ENOSPC, EACCES, ...).
  void write(std::span<const std::byte> bytes);
  void write_zeros(std::size_t count);
  std::uint64_t size() const noexcept { return written_; }
  // fsync, rename into place, fsync the directory.
  void commit();
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  std::string temporary_path_;
  int fd_ = -1;
  std::uint64_t written_ = 0;
};

// Writes a whole small file atomically.
void write_file_atomic(const std::string& path, std::span<const std::byte> bytes);
void write_file_atomic(const std::string& path, const std::string& text);
// fsyncs a directory so a rename inside it survives a crash.
void sync_directory(const std::string& directory);

}  // namespace gpucache::detail
