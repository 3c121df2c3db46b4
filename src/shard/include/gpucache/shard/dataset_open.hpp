// The one dataset opener (SPEC.md, "Opening a dataset"): a dataset directory's manifest read,
// parsed and its hash checked, and its shard set (which shard files are there, at which sizes,
// which the manifest does not list, leftover temporaries) checked as the caller's mode says. The
// runtime, merge, pack --append, push, export, verify and inspect all open a dataset here and
// keep no check of their own; what differs between them is a mode, one row of the mode table in
// dataset_open.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpucache/shard/dataset_check.hpp"
#include "gpucache/shard/manifest.hpp"

namespace gpucache::shard {

enum class OpenMode {
  // export: every listed shard present at its recorded size, no unlisted shard file, no leftover
  // temporary, at least one shard; the first problem is thrown.
  strict,
  // verify: the strict checks, with every problem returned (verify lists them all and exits 1);
  // a missing or unreadable manifest is one of them, and the shard files are still listed.
  audit,
  // merge's parts, pack --append and its staging dataset, push: every listed shard present at its
  // recorded size; shard files the manifest does not list and temporaries are tolerated (a killed
  // append leaves them; no reader looks at them) and returned in `unlisted`. Refuses like strict.
  listed,
  // the runtime, local or remote: the manifest alone, so opening costs one file read however many
  // shards there are; each shard is checked against the manifest when a load maps (or fetches) it.
  manifest_only,
  // inspect: the strict checks, every problem returned as a warning; only a missing or unreadable
  // manifest is refused (there is nothing to show without it).
  lenient,
};

std::string_view open_mode_name(OpenMode mode) noexcept;

struct OpenedDataset {
  std::string dir;
  std::string manifest_path;  // DIR/manifest.json
  // Set in every mode; in audit mode nothing when the manifest is missing or unreadable.
  std::optional<Manifest> manifest;
  std::string recorded_hash;  // the manifest_hash the file carries
  bool hash_ok = false;
  // The shard files in the directory, sorted (every mode but manifest_only).
  std::vector<std::string> shard_files;
  // Per shard of the manifest: whether its file is there at its recorded size.
  std::vector<bool> listed_intact;
  // Shard files the manifest does not list (listed mode tolerates them; pack --append removes
  // them before it links its own).
  std::vector<std::string> unlisted;
  // audit and lenient: every problem found, in order (manifest, temporaries, listing, sizes). The
  // refusing modes throw the first instead, so this is empty there.
  std::vector<DatasetProblem> problems;
};

// Opens the dataset directory `dir` as `mode` says. Throws Error naming the file for what the mode
// refuses: `dir` not a directory, a missing, unreadable or malformed manifest, a manifest hash
// that does not match, and (strict, listed) the first shard-set problem.
OpenedDataset open_dataset(const std::string& dir, OpenMode mode);

}  // namespace gpucache::shard
