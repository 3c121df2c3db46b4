#include "hdf5_library.hpp"

#include <mutex>

#include "gpucache/error.hpp"

namespace gpucache::detail {
namespace {

herr_t keep_innermost(unsigned position, const H5E_error2_t* error, void* out) {
  if (position == 0 && error->desc) *static_cast<std::string*>(out) = error->desc;
  return 0;
}

[[noreturn]] void throw_hdf5(const std::string& file, const std::string& location,
                             const std::string& what) {
  const std::string cause = take_hdf5_error();
  throw Error(file, location, cause.empty() ? what : what + ": " + cause);
}

std::recursive_mutex& hdf5_mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

bool in_forked_child = false;

}  // namespace

Hdf5Guard::Hdf5Guard() {
  if (!in_forked_child) hdf5_mutex().lock();
  thread_local bool quiet = false;
  if (quiet) return;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  quiet = true;
}

Hdf5Guard::~Hdf5Guard() {
  if (!in_forked_child) hdf5_mutex().unlock();
}

void Hdf5Guard::forked_child() noexcept {
  in_forked_child = true;
}

Hdf5Handle::~Hdf5Handle() {
  if (id_ < 0) return;
  const Hdf5Guard guard;
  H5Idec_ref(id_);
}

std::string take_hdf5_error() {
  std::string message;
  // Upward from the call that failed first: the innermost, most specific message.
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, &message);
  H5Eclear2(H5E_DEFAULT);
  return message;
}

hid_t hdf5_check(hid_t result, const std::string& file, const std::string& location,
                 const std::string& what) {
  if (result < 0) throw_hdf5(file, location, what);
  return result;
}

herr_t hdf5_check(herr_t result, const std::string& file, const std::string& location,
                  const std::string& what) {
  if (result < 0) throw_hdf5(file, location, what);
  return result;
}

}  // namespace gpucache::detail
