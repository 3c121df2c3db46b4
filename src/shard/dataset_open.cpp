#include "gpucache/shard/dataset_open.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "gpucache/error.hpp"
#include "gpucache/shard/dataset_files.hpp"

namespace gpucache::shard {
namespace {

namespace fs = std::filesystem;

// What each mode checks and what it does with a problem: the one table the callers' policies are
// read from (dataset_open.hpp says which caller takes which mode and why).
struct ModeRules {
  OpenMode mode;
  std::string_view name;
  bool checks_files;      // listed shards present at their recorded sizes
  bool whole_directory;   // unlisted shard files and leftover temporaries are problems
  bool refuses;           // the first problem is thrown; otherwise every one is returned
  bool reports_manifest;  // a missing or unreadable manifest is a problem, not an error
};

constexpr ModeRules kModes[] = {
    {OpenMode::strict, "strict", true, true, true, false},
    {OpenMode::audit, "audit", true, true, false, true},
    {OpenMode::listed, "listed", true, false, true, false},
    {OpenMode::manifest_only, "manifest_only", false, false, true, false},
    {OpenMode::lenient, "lenient", true, true, false, false},
};

const ModeRules& rules_of(OpenMode mode) noexcept {
  for (const auto& rules : kModes)
    if (rules.mode == mode) return rules;
  return kModes[0];
}

// The names in the directory that matter to the opener.
struct Listing {
  std::vector<std::string> shard_files;  // sorted
  std::vector<std::string> temporaries;  // dataset files still under their temporary name
  bool pack_state = false;               // a pack's plan: a pack ran here and did not finish
};

Listing list_directory(const std::string& dir) {
  Listing listing;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (is_temporary_name(name)) {
      if (is_dataset_file(name)) listing.temporaries.push_back(name);
    } else if (shard_file_index(name)) {
      listing.shard_files.push_back(name);
    } else if (name == kPackStateName) {
      listing.pack_state = true;
    }
  }
  if (error) throw Error(dir, "", "cannot list the directory: " + error.message());
  std::sort(listing.shard_files.begin(), listing.shard_files.end());
  std::sort(listing.temporaries.begin(), listing.temporaries.end());
  return listing;
}

// Why there is no manifest, from what else the directory holds.
std::string missing_manifest_cause(const Listing& listing) {
  if (listing.pack_state)
    return "missing: the pack is unfinished (gpucache pack --resume finishes it)";
  if (!listing.shard_files.empty())
    return "missing: the dataset is unfinished (gpucache pack writes the manifest last; an "
           "interrupted pack leaves an incomplete dataset)";
  return "missing, and no shard-*.gcs files: not a gpucache dataset";
}

// Throws `problem` as an Error: a file of the dataset is named by its path in the directory.
[[noreturn]] void refuse(const OpenedDataset& opened, const DatasetProblem& problem) {
  const std::string file =
      problem.file == opened.dir ? problem.file : (fs::path(opened.dir) / problem.file).string();
  throw Error(file, problem.location, problem.cause);
}

std::string size_cause(std::uint64_t size, std::uint64_t recorded) {
  return "is " + std::to_string(size) + " bytes but the manifest says " + std::to_string(recorded) +
         (size < recorded ? " (truncated)" : " (extended)");
}

}  // namespace

std::string_view open_mode_name(OpenMode mode) noexcept {
  return rules_of(mode).name;
}

OpenedDataset open_dataset(const std::string& dir, OpenMode mode) {
  const ModeRules& rules = rules_of(mode);
  OpenedDataset opened;
  opened.dir = dir;
  opened.manifest_path = (fs::path(dir) / kManifestName).string();
  std::error_code error;
  if (!fs::is_directory(dir, error)) throw Error(dir, "", "is not a dataset directory");
  auto& problems = opened.problems;

  std::optional<Listing> listing;
  if (rules.checks_files) listing = list_directory(dir);
  if (!fs::exists(opened.manifest_path, error)) {
    if (!listing) listing = list_directory(dir);
    const std::string cause = missing_manifest_cause(*listing);
    if (!rules.reports_manifest) throw Error(dir, kManifestName, cause);
    problems.push_back({kManifestName, "", cause});
  } else {
    try {
      OpenedManifest read = open_manifest(dir);
      opened.manifest = std::move(read.manifest);
      opened.recorded_hash = std::move(read.recorded_hash);
      opened.hash_ok = read.hash_ok;
    } catch (const Error& failure) {
      if (!rules.reports_manifest) throw;
      problems.push_back({kManifestName, failure.location(), failure.cause()});
    } catch (const std::exception& failure) {
      if (!rules.reports_manifest) throw;
      problems.push_back({kManifestName, "", std::string("malformed: ") + failure.what()});
    }
    if (opened.manifest && !opened.hash_ok) {
      // The readers refuse it and send the user to verify, which lists what else is wrong.
      const std::string cause =
          std::string(
              "does not match the manifest's content: manifest.json was edited or "
              "corrupted") +
          (rules.refuses ? "; run gpucache verify" : "");
      if (rules.refuses) throw Error(opened.manifest_path, "manifest_hash", cause);
      problems.push_back({kManifestName, "manifest_hash", cause});
    }
  }

  if (listing) {
    opened.shard_files = listing->shard_files;
    if (rules.whole_directory)
      for (const auto& name : listing->temporaries)
        problems.push_back({name, "", "leftover temporary file from an interrupted pack"});
  }
  if (opened.manifest) {
    const Manifest& manifest = *opened.manifest;
    check_manifest_rows(manifest, problems);
    if (listing) {
      opened.listed_intact.assign(manifest.shards.size(), false);
      for (std::size_t i = 0; i < manifest.shards.size(); ++i) {
        const auto& listed = manifest.shards[i];
        if (!std::binary_search(listing->shard_files.begin(), listing->shard_files.end(),
                                listed.file)) {
          problems.push_back({listed.file, "", "missing: listed in the manifest but not on disk"});
          continue;
        }
        const auto size = fs::file_size(fs::path(dir) / listed.file, error);
        if (error) {
          problems.push_back({listed.file, "", "cannot read its size: " + error.message()});
          continue;
        }
        if (size != listed.bytes) {
          problems.push_back({listed.file, "", size_cause(size, listed.bytes)});
          continue;
        }
        opened.listed_intact[i] = true;
      }
      for (const auto& name : listing->shard_files) {
        const bool listed =
            std::any_of(manifest.shards.begin(), manifest.shards.end(),
                        [&](const ManifestShard& shard) { return shard.file == name; });
        if (listed) continue;
        opened.unlisted.push_back(name);
        if (rules.whole_directory)
          problems.push_back({name, "", "extra shard: not listed in the manifest"});
      }
    }
    if (rules.refuses && manifest.shards.empty())
      problems.push_back({kManifestName, "shards", "the dataset has no shards"});
  }
  if (rules.refuses && !problems.empty()) refuse(opened, problems.front());
  return opened;
}

}  // namespace gpucache::shard
