// Errors thrown by gpucache. Every error names the file, where in it, and what is wrong, so the
// CLI can print it as one line and a Python user sees the same text.
#pragma once

#include <stdexcept>
#include <string>

#include "gpucache/api.hpp"

namespace gpucache {

class GPUCACHE_API Error : public std::runtime_error {
 public:
  // file: the path involved (may be empty); location: where in it ("byte 123", "shard 2 column
  // embedding", "line 7"); cause: what is wrong.
  Error(std::string file, std::string location, std::string cause)
      : std::runtime_error(compose(file, location, cause)),
        file_(std::move(file)),
        location_(std::move(location)),
        cause_(std::move(cause)) {}

  const std::string& file() const noexcept { return file_; }
  const std::string& location() const noexcept { return location_; }
  const std::string& cause() const noexcept { return cause_; }

 private:
  static std::string compose(const std::string& file, const std::string& location,
                             const std::string& cause) {
    std::string text;
    if (!file.empty()) text += file + ": ";
    if (!location.empty()) text += location + ": ";
    return text + cause;
  }
  std::string file_, location_, cause_;
};

// Raised for command-line misuse (unknown options, conflicting flags): exit code 2 like any Error.
class GPUCACHE_API UsageError : public Error {
 public:
  explicit UsageError(std::string cause) : Error("", "", std::move(cause)) {}
};

}  // namespace gpucache
