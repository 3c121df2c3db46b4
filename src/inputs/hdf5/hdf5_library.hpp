// The thin layer between gpucache and libhdf5's C API: handles that close themselves, and calls
// whose failure becomes one gpucache::Error line instead of HDF5's printed error stack.
#pragma once

#include <hdf5.h>

#include <string>
#include <utility>

namespace gpucache::detail {

// Owns one HDF5 identifier (file, dataset, dataspace, datatype, property list) and releases it.
class Hdf5Handle {
 public:
  Hdf5Handle() = default;
  explicit Hdf5Handle(hid_t id) noexcept : id_(id) {}
  Hdf5Handle(Hdf5Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Hdf5Handle& operator=(Hdf5Handle&& other) noexcept {
    std::swap(id_, other.id_);
    return *this;
  }
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;
  ~Hdf5Handle();

  hid_t get() const noexcept { return id_; }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Held while calling libhdf5. It lets one thread in at a time (a thread-safe libhdf5, as
// Debian's, serialises calls itself anyway; one that is not needs it), so that no thread is inside
// libhdf5 while the reader forks; and it turns off libhdf5's printing of its error stack for the
// calling thread (a thread-safe libhdf5 keeps that setting per thread). Recursive.
class Hdf5Guard {
 public:
  Hdf5Guard();
  ~Hdf5Guard();
  Hdf5Guard(const Hdf5Guard&) = delete;
  Hdf5Guard& operator=(const Hdf5Guard&) = delete;

  // In a child forked while the parent held a guard: the child's only thread may call libhdf5
  // without the lock, which it inherited held by a thread it does not have.
  static void forked_child() noexcept;
};

// The innermost message of the calling thread's HDF5 error stack ("file signature not found"),
// which is then cleared; empty when the stack is empty.
std::string take_hdf5_error();

// Throws gpucache::Error(file, location, what + ": " + HDF5's message) when result < 0.
hid_t hdf5_check(hid_t result, const std::string& file, const std::string& location,
                 const std::string& what);
herr_t hdf5_check(herr_t result, const std::string& file, const std::string& location,
                  const std::string& what);

}  // namespace gpucache::detail
