// A growable array of a few bytes per row that moves out of the heap into an unlinked file once it
// outgrows a limit, so that pack's per-row bookkeeping (verdicts, norms, kept rows) costs disk
// pages the kernel may drop rather than resident memory. Loops over it call release() on what
// they are done with: a file-backed range then leaves the process's resident set (its contents
// stay in the file); on the heap release() does nothing. Zero bytes must be a valid T (new
// elements are zero), and T is copied as bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpucache::detail {

struct SpillPolicy {
  std::string directory;  // where the file goes (unlinked at once); empty: stay on the heap
  std::uint64_t heap_limit_bytes = std::uint64_t(64) << 20;
};

// The untyped storage behind SpillArray: bytes on the heap, or a shared map of an unlinked file
// whose blocks are allocated up front (fallocate), so that a full disk is an Error when the array
// grows, never a SIGBUS when it is written.
class SpillBuffer {
 public:
  SpillBuffer() = default;
  explicit SpillBuffer(SpillPolicy policy) : policy_(std::move(policy)) {}
  SpillBuffer(const SpillBuffer& other);
  SpillBuffer& operator=(const SpillBuffer& other);
  SpillBuffer(SpillBuffer&& other) noexcept;
  SpillBuffer& operator=(SpillBuffer&& other) noexcept;
  ~SpillBuffer();

  std::byte* data() noexcept { return file_ ? mapped_ : heap_.data(); }
  const std::byte* data() const noexcept { return file_ ? mapped_ : heap_.data(); }
  std::size_t size() const noexcept { return size_; }
  bool spilled() const noexcept { return file_; }
  const SpillPolicy& policy() const noexcept { return policy_; }

  // Grows (new bytes zero) or shrinks; capacity grows geometrically. Throws gpucache::Error
  // naming the directory when the file cannot be made or grown (a full disk among them).
  void resize(std::size_t bytes);
  // Drops the resident pages of [offset, offset + length) when file-backed (rounded out to whole
  // pages: the file keeps every byte, so neighbouring data is never lost).
  void release(std::size_t offset, std::size_t length) noexcept;
  void clear() noexcept;

 private:
  void spill(std::size_t capacity);
  void grow_file(std::size_t capacity);

  SpillPolicy policy_;
  std::vector<std::byte> heap_;
  bool file_ = false;
  int fd_ = -1;
  std::byte* mapped_ = nullptr;
  std::size_t capacity_ = 0;  // bytes mapped and allocated in the file
  std::size_t size_ = 0;
  std::size_t written_ = 0;  // file-backed: the largest size so far (bytes past it are zero)
};

template <class T>
class SpillArray {
  static_assert(std::is_trivially_copyable_v<T>, "a SpillArray copies its elements as bytes");

 public:
  SpillArray() = default;
  explicit SpillArray(SpillPolicy policy) : buffer_(std::move(policy)) {}

  std::size_t size() const noexcept { return buffer_.size() / sizeof(T); }
  bool empty() const noexcept { return size() == 0; }
  T* data() noexcept { return reinterpret_cast<T*>(buffer_.data()); }
  const T* data() const noexcept { return reinterpret_cast<const T*>(buffer_.data()); }
  T* begin() noexcept { return data(); }
  T* end() noexcept { return data() + size(); }
  const T* begin() const noexcept { return data(); }
  const T* end() const noexcept { return data() + size(); }
  T& operator[](std::size_t i) noexcept { return data()[i]; }
  const T& operator[](std::size_t i) const noexcept { return data()[i]; }
  T& back() noexcept { return data()[size() - 1]; }
  bool spilled() const noexcept { return buffer_.spilled(); }
  const SpillPolicy& policy() const noexcept { return buffer_.policy(); }

  void resize(std::size_t count) { buffer_.resize(count * sizeof(T)); }
  void push_back(const T& value) {
    const std::size_t at = size();
    resize(at + 1);
    std::memcpy(data() + at, &value, sizeof(T));
  }
  void clear() noexcept { buffer_.clear(); }
  void release(std::size_t first, std::size_t count) noexcept {
    buffer_.release(first * sizeof(T), count * sizeof(T));
  }
  void release_all() noexcept { release(0, size()); }

  friend bool operator==(const SpillArray& a, const SpillArray& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const SpillArray& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  SpillBuffer buffer_;
};

}  // namespace gpucache::detail
