// The source tree's rules (docs/architecture.md): file names are unique across src/, so a
// bare-name include or a stack trace is never ambiguous, and no folder holds more than 25 source
// files at one level (folders are cut by job instead).
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

namespace fs = std::filesystem;

namespace {

bool is_source(const fs::path& path) {
  static const std::set<std::string> extensions = {".cpp", ".hpp", ".h", ".c",
                                                   ".cu",  ".cuh", ".py"};
  return extensions.contains(path.extension().string());
}

}  // namespace

TEST_CASE("file names are unique across src/ and no folder holds over 25 source files") {
  const fs::path src = fs::path(GPUCACHE_TEST_DATA) / ".." / ".." / "src";
  REQUIRE(fs::is_directory(src));
  std::map<std::string, std::string> seen;  // file name -> first path
  std::map<std::string, int> per_folder;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file() || !is_source(entry.path())) continue;
    const std::string relative = fs::relative(entry.path(), src).generic_string();
    if (relative.find("__pycache__") != std::string::npos) continue;
    ++per_folder[fs::relative(entry.path().parent_path(), src).generic_string()];
    // Python packages have their own namespaces (__init__.py in each); C and C++ files share one.
    if (entry.path().extension() == ".py") continue;
    const auto [at, inserted] = seen.emplace(entry.path().filename().string(), relative);
    if (!inserted) FAIL_CHECK("src/" << relative << " has the name of src/" << at->second);
  }
  for (const auto& [folder, count] : per_folder) {
    CAPTURE(folder);
    CHECK(count <= 25);
  }
}
