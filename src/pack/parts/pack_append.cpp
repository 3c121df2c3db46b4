#include "pack_append.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "gpucache/common/atomic_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/shard/dataset_files.hpp"
#include "merge_parts.hpp"

namespace gpucache::detail {
namespace {

namespace fs = std::filesystem;

// The per-column checks follow from the inputs' columns, unknown before they are read; they are
// compared with the rest once the new rows are staged (check_same_layout).
nlohmann::json without_column_checks(nlohmann::json options) {
  if (options.is_object() && options.contains("validation") && options["validation"].is_object())
    options["validation"].erase("columns");
  return options;
}

constexpr const char* kStagingName = ".append";

// Shard files a killed append linked in before it could replace the manifest: not listed, so no
// reader uses them (the opener's listed mode names them); removed before the next append places
// its own.
// Only those numbered after the listed ones: another unlisted name is no append's, and is kept.
void remove_unlisted_shards(const DatasetPart& part) {
  std::error_code error;
  for (const auto& name : part.unlisted)
    if (*shard::shard_file_index(name) >= part.manifest.shards.size())
      fs::remove(fs::path(part.dir) / name, error);
}

}  // namespace

PackResult pack_append(const PackOptions& options) {
  const std::string& dir = options.append_to;
  if (!options.output_dir.empty())
    throw UsageError("--append DATASET writes into DATASET; leave out -o");
  if (options.part || !options.splits.empty())
    throw UsageError("--append cannot be combined with --part or --split");
  // Each split is a dataset of its own: rows are appended to one of them, OUT/VALUE.
  if (!options.split_by.empty())
    throw UsageError(
        "--append cannot be combined with --split-by: append each value's rows to its own "
        "dataset (--append OUT/VALUE with the rows of that value)");
  if (options.force) throw UsageError("--append never replaces a dataset; leave out --force");
  const int lock = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock < 0)
    throw Error(dir, "", std::string("cannot open the dataset: ") + std::strerror(errno));
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock};
  if (::flock(lock, LOCK_EX | LOCK_NB) != 0)
    throw Error(dir, "", "another gpucache pack is writing to this dataset");

  DatasetPart existing = read_part(dir);
  for (std::size_t i = 0; i < existing.manifest.shards.size(); ++i)
    if (existing.manifest.shards[i].file != shard::shard_file_name(static_cast<std::uint32_t>(i)))
      throw Error(dir, "shards[" + std::to_string(i) + "]",
                  "is named " + existing.manifest.shards[i].file + ", not " +
                      shard::shard_file_name(static_cast<std::uint32_t>(i)) +
                      ": append numbers new shards after the existing ones");
  // Refused before any row is read: the new rows must be packed the way the old ones were. How
  // their dtypes were asked for is not compared here: the staged columns' stored dtypes are,
  // below (check_same_layout).
  check_same_options(without_column_checks(existing.manifest.options), pack_options_json(options),
                     dir, "the dataset",
                     "this run (pass the options the dataset was packed with; inspect shows them)");
  remove_unlisted_shards(existing);

  const std::string staging = (fs::path(dir) / kStagingName).string();
  PackOptions staged_options = options;
  staged_options.append_to.clear();
  staged_options.output_dir = staging;
  std::error_code error;
  // An append killed while packing left its staging dataset: --resume finishes it (or, when it
  // was complete, only links it in), anything else starts it over.
  const bool staged_complete = fs::exists(fs::path(staging) / shard::kManifestName, error);
  PackResult result;
  if (options.resume && staged_complete) {
    result.resumed_shards = 1;  // set below to the shard count: every staged shard is kept
  } else {
    staged_options.force = !options.resume;
    staged_options.resume = options.resume && fs::exists(staging, error);
    result = pack(staged_options);
  }

  DatasetPart staged = read_part(staging);
  if (options.resume && staged_complete) {
    result.rows = result.input_rows = staged.manifest.rows;
    result.resumed_shards = staged.manifest.shards.size();
    for (const auto& shard : staged.manifest.shards) {
      result.shards.push_back({shard.file, shard.rows, shard.bytes});
      result.bytes += shard.bytes;
    }
  }
  staged.dir = dir + " (append " + std::to_string(existing.segments.size()) + ")";
  try {
    check_same_layout(existing, staged);
  } catch (const Error&) {
    // The staged rows can never join this dataset: nothing is left for --resume to finish.
    fs::remove_all(staging, error);
    throw;
  }
  const shard::Manifest combined = combine_parts({existing, staged});
  const std::size_t first_new = existing.manifest.shards.size();
  for (std::size_t i = 0; i < staged.manifest.shards.size(); ++i) {
    const fs::path from = fs::path(staging) / staged.manifest.shards[i].file;
    const fs::path to = fs::path(dir) / combined.shards[first_new + i].file;
    fs::remove(to, error);
    if (::link(from.c_str(), to.c_str()) != 0)
      throw Error(to.string(), "",
                  "cannot hard-link " + from.string() + ": " + std::strerror(errno));
    result.shards[i].file = combined.shards[first_new + i].file;
  }
  const auto durability = durability_for(options.fsync);
  sync_directory(dir, durability);
  // The one step that changes the dataset: readers see the old manifest or the new one.
  write_file_atomic((fs::path(dir) / shard::kManifestName).string(),
                    shard::manifest_to_text(combined), durability);
  fs::remove_all(staging, error);
  sync_directory(dir, durability);
  result.output_dir = dir;
  return result;
}

}  // namespace gpucache::detail
