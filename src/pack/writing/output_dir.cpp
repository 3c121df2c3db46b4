#include "output_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpucache/common/atomic_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/shard/manifest.hpp"

namespace gpucache::detail {
namespace fs = std::filesystem;

namespace {

// What differs between the interrupted pack's plan and this run's (plan_text: tool_version,
// inputs, options, shards): the first recorded option that differs, by name and both values (an
// --input-map entry's mapping, say), else the inputs, else the rest.
std::string plan_difference(const std::string& stored, const std::string& planned) {
  const auto a = nlohmann::json::parse(stored, nullptr, false);
  const auto b = nlohmann::json::parse(planned, nullptr, false);
  if (a.is_discarded() || !a.is_object() || !b.is_object()) return "the inputs or options differ";
  const auto value = [](const nlohmann::json& json, const std::string& key) {
    return json.is_object() && json.contains(key) ? json[key].dump() : std::string("unset");
  };
  const nlohmann::json empty = nlohmann::json::object();
  const auto& old_options = a.contains("options") ? a["options"] : empty;
  const auto& new_options = b.contains("options") ? b["options"] : empty;
  for (const auto* keys : {&old_options, &new_options})
    if (keys->is_object())
      for (const auto& [key, ignored] : keys->items())
        if (value(old_options, key) != value(new_options, key))
          return "option " + key + " is " + value(old_options, key) +
                 " in the interrupted pack but " + value(new_options, key) + " in this run";
  if (value(a, "inputs") != value(b, "inputs"))
    return "the inputs differ (paths, sizes or contents)";
  if (value(a, "tool_version") != value(b, "tool_version"))
    return "the interrupted pack was run by gpucache " + value(a, "tool_version");
  return "the rows kept or their shards differ";
}

void remove_matching(const std::string& dir, bool (*predicate)(std::string_view) noexcept) {
  std::error_code error;
  // Only files: gpucache writes nothing else, and a directory of the same name is not ours.
  for (const auto& entry : fs::directory_iterator(dir, error))
    if (!entry.is_directory(error) && predicate(entry.path().filename().string()))
      fs::remove(entry.path(), error);
  if (error) throw Error(dir, "", "cannot clean the output directory: " + error.message());
}

bool is_temporary_dataset_file(std::string_view name) noexcept {
  return shard::is_temporary_name(name) && shard::is_dataset_file(name);
}

}  // namespace

std::string nearest_existing_directory(const std::string& dir) {
  std::error_code error;
  fs::path path = fs::absolute(dir.empty() ? "." : dir, error).lexically_normal();
  while (!fs::is_directory(path, error) && path.has_parent_path() && path != path.parent_path())
    path = path.parent_path();
  return path.string();
}

SpillPolicy row_spill_policy(const std::string& output_dir) {
  SpillPolicy policy;
  policy.directory = nearest_existing_directory(output_dir);
  if (const char* limit = std::getenv("GPUCACHE_ROW_HEAP_LIMIT")) {
    char* end = nullptr;
    const unsigned long long bytes = std::strtoull(limit, &end, 10);
    if (end != limit && *end == '\0') policy.heap_limit_bytes = bytes;
  }
  return policy;
}

OutputDir::OutputDir(std::string dir, OutputMode mode, Durability durability)
    : dir_(std::move(dir)), mode_(mode), durability_(durability) {
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
    // Only finished files count: temporaries alone are what a run killed while writing its plan
    // leaves, with nothing to resume, and a fresh run clears them.
    bool has_dataset = false, ours = false;
    std::string foreign;  // a file gpucache did not write
    for (const auto& entry : fs::directory_iterator(dir_, error)) {
      const std::string name = entry.path().filename().string();
      has_dataset |= shard::is_dataset_file(name) && !shard::is_temporary_name(name);
      ours |= shard::is_dataset_file(name);
      if (!shard::is_dataset_file(name) && foreign.empty()) foreign = name;
    }
    // Someone else's folder: pack would mix its shards into it (and --force would not know
    // what to clear), so only an empty folder or one a pack wrote (a dataset, or what a killed
    // pack left) is written to.
    if (!ours && !foreign.empty())
      throw Error(dir_, "",
                  "is not empty and holds no gpucache dataset (it has '" + foreign +
                      "'); pack into a new or empty folder");
    if (mode_ == OutputMode::fresh && has_dataset) {
      const bool unfinished = fs::exists(fs::path(dir_) / shard::kPackStateName, error) &&
                              !fs::exists(fs::path(dir_) / shard::kManifestName, error);
      throw Error(
          dir_, "",
          unfinished
              ? "holds an unfinished pack; pass --resume to finish it or --force to start over"
              : "already holds a gpucache dataset; pass --force to replace it");
    }
    if (mode_ == OutputMode::fresh) remove_matching(dir_, is_temporary_dataset_file);
    if (mode_ == OutputMode::replace) {
      fs::remove(fs::path(dir_) / shard::kManifestName, error);
      remove_matching(dir_, shard::is_dataset_file);
    }
    if (mode_ == OutputMode::resume) {
      if (fs::exists(fs::path(dir_) / shard::kManifestName, error))
        throw Error(dir_, "", "the dataset is already finished: nothing to resume");
      remove_matching(dir_, is_temporary_dataset_file);
    }
  } catch (...) {
    ::close(lock_fd_);
    throw;
  }
}

OutputDir::~OutputDir() {
  if (!finished_) {
    // A failed fresh or replacing run leaves nothing; a failed resume keeps its complete shards
    // and plan so it can be resumed again.
    try {
      remove_matching(
          dir_, mode_ == OutputMode::resume ? is_temporary_dataset_file : shard::is_dataset_file);
    } catch (...) {
    }
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string OutputDir::file(const std::string& name) const {
  return (fs::path(dir_) / name).string();
}

void OutputDir::record_plan(const std::string& plan_text) {
  const std::string path = file(shard::kPackStateName);
  if (mode_ != OutputMode::resume) {
    write_file_atomic(path, plan_text, durability_);
    return;
  }
  std::ifstream stream(path, std::ios::binary);
  if (!stream)
    throw Error(dir_, "", "has no pack-state.json: there is no interrupted pack here to resume");
  std::ostringstream stored;
  stored << stream.rdbuf();
  if (stored.str() != plan_text)
    throw Error(path, "",
                plan_difference(stored.str(), plan_text) +
                    ": rerun the interrupted pack with the same inputs and options, or use --force "
                    "to start over");
}

void OutputDir::finish(const std::string& manifest_text) {
  write_file_atomic(file(shard::kManifestName), manifest_text, durability_);
  std::error_code error;
  fs::remove(file(shard::kPackStateName), error);
  sync_directory(dir_, durability_);
  finished_ = true;
}

}  // namespace gpucache::detail
