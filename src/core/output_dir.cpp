#include "src/core/output_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "formats/shard/manifest.hpp"
#include "gpucache/detail/atomic_file.hpp"
#include "gpucache/error.hpp"

namespace gpucache::detail {
namespace fs = std::filesystem;

bool is_dataset_file(const std::string& name) {
  std::string base = name;
  if (base.size() > 4 && base.ends_with(".tmp")) base.resize(base.size() - 4);
  return base == shard::kManifestName || (base.starts_with("shard-") && base.ends_with(".gcs"));
}

namespace {

void remove_old_dataset(const std::string& dir, bool force) {
  std::error_code error;
  bool has_dataset = false;
  for (const auto& entry : fs::directory_iterator(dir, error))
    if (is_dataset_file(entry.path().filename().string())) has_dataset = true;
  if (error) throw Error(dir, "", "cannot list the output directory: " + error.message());
  if (!has_dataset) return;
  if (!force) throw Error(dir, "", "already holds a gpucache dataset; pass --force to replace it");
  // The manifest goes first so an interrupted replacement never looks like a finished dataset.
  fs::remove(fs::path(dir) / shard::kManifestName, error);
  for (const auto& entry : fs::directory_iterator(dir, error))
    if (is_dataset_file(entry.path().filename().string())) fs::remove(entry.path(), error);
  if (error) throw Error(dir, "", "cannot remove the old dataset: " + error.message());
}

}  // namespace

OutputCleanup::OutputCleanup(std::string dir, bool force) : dir_(std::move(dir)) {
  std::error_code error;
  if (fs::exists(dir_, error) && !fs::is_directory(dir_, error))
    throw Error(dir_, "", "exists and is not a directory");
  fs::create_directories(dir_, error);
  if (error) throw Error(dir_, "", "cannot create the output directory: " + error.message());
  lock_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock_fd_ < 0)
    throw Error(dir_, "", std::string("cannot open the output directory: ") + std::strerror(errno));
  try {
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0)
      throw Error(dir_, "", "another gpucache pack is writing to this directory");
    remove_old_dataset(dir_, force);
  } catch (...) {
    ::close(lock_fd_);
    throw;
  }
}

OutputCleanup::~OutputCleanup() {
  if (!released_) {
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(dir_, error))
      if (is_dataset_file(entry.path().filename().string())) fs::remove(entry.path(), error);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void write_manifest(const std::string& dir, const std::string& text) {
  write_file_atomic((fs::path(dir) / shard::kManifestName).string(), text);
}

}  // namespace gpucache::detail
