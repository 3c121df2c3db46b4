// How the remote module reads the environment and small files, passed in so tests can give their
// own.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace gpucache::remote::detail {

// Reads an environment variable; std::nullopt when unset or empty.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
EnvLookup process_environment();
// Reads a whole file; std::nullopt when it does not exist.
using FileLookup = std::function<std::optional<std::string>(const std::string& path)>;
FileLookup real_files();

}  // namespace gpucache::remote::detail
