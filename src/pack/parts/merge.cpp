#include "gpucache/merge.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "gpucache/common/atomic_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/progress.hpp"
#include "merge_parts.hpp"
#include "output_budget.hpp"

namespace gpucache {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// Orders parts packed with --part by their index and checks that they are the N parts of one run;
// other datasets keep the order given.
void order_parts(std::vector<detail::DatasetPart>& parts) {
  auto part_of = [](const detail::DatasetPart& part) -> const Json* {
    const auto& options = part.manifest.options;
    return options.contains("part") ? &options["part"] : nullptr;
  };
  const auto with_part = std::count_if(parts.begin(), parts.end(),
                                       [&](const auto& part) { return part_of(part) != nullptr; });
  if (with_part == 0) return;
  if (static_cast<std::size_t>(with_part) != parts.size())
    throw UsageError(
        "some datasets given to merge were packed with --part and some were not; "
        "merge the parts first, then that dataset with the others");
  std::stable_sort(parts.begin(), parts.end(), [&](const auto& a, const auto& b) {
    return (*part_of(a))["index"].template get<std::uint64_t>() <
           (*part_of(b))["index"].template get<std::uint64_t>();
  });
  const auto count = (*part_of(parts.front()))["count"].get<std::uint64_t>();
  std::string missing;
  std::size_t next = 0;
  for (std::uint64_t k = 0; k < count; ++k) {
    if (next < parts.size() && (*part_of(parts[next]))["index"].get<std::uint64_t>() == k) {
      ++next;
      if (next < parts.size() && (*part_of(parts[next]))["index"].get<std::uint64_t>() == k)
        throw UsageError("part " + std::to_string(k) + "/" + std::to_string(count) +
                         " is given twice: " + parts[next - 1].dir + " and " + parts[next].dir);
      continue;
    }
    missing += (missing.empty() ? "" : ", ") + std::to_string(k);
  }
  if (!missing.empty())
    throw UsageError("parts " + missing + " of " + std::to_string(count) +
                     " are missing; merge needs every part of a --part run");
}

// The temporary directory a merge builds in, beside the output so the final rename is atomic.
fs::path staging_dir(const fs::path& output) {
  return output.parent_path() / ("." + output.filename().string() + ".merging");
}

// Places one shard under its new name: a hard link (no bytes copied), or a copy when allowed.
// Returns the bytes copied.
std::uint64_t place_shard(const fs::path& from, const fs::path& to, bool copy,
                          const std::string& output, detail::Durability durability) {
  if (::link(from.c_str(), to.c_str()) == 0) return 0;
  const int cause = errno;
  if ((cause == EXDEV || cause == EPERM || cause == EMLINK || cause == ENOTSUP) && copy) {
    std::error_code error;
    fs::copy_file(from, to, error);
    if (error)
      throw Error(to.string(), "", "cannot copy " + from.string() + ": " + error.message());
    // A hard link shares the part's data, which its pack made durable; a copy is new data.
    detail::sync_file(to.string(), durability);
    return fs::file_size(to);
  }
  if (cause == EXDEV)
    throw Error(output, "",
                "is on another file system than " + from.parent_path().string() +
                    ", so shards cannot be hard-linked; pass --copy to copy them");
  throw Error(to.string(), "",
              "cannot hard-link " + from.string() + ": " + std::strerror(cause) +
                  (copy ? "" : " (pass --copy to copy the shards instead)"));
}

// The shards of parts on another file system than `dir` are copied, not linked: refused before
// the first copy when they do not fit in its free space.
void check_copied_bytes(const std::vector<detail::DatasetPart>& parts, const fs::path& dir) {
  struct stat target {};
  if (::stat(dir.c_str(), &target) != 0) return;
  std::uint64_t copied = 0, copied_shards = 0;
  for (const auto& part : parts) {
    struct stat source {};
    if (::stat(part.dir.c_str(), &source) != 0 || source.st_dev == target.st_dev) continue;
    for (const auto& shard : part.manifest.shards) copied += shard.bytes;
    copied_shards += part.manifest.shards.size();
  }
  if (copied)
    detail::check_free_space(copied, detail::free_space_margin(copied_shards), dir.string(),
                             "the shards to copy take " + format_bytes(double(copied)) + " (" +
                                 std::to_string(copied) + " bytes)");
}

}  // namespace

MergeResult merge(const MergeOptions& options) {
  if (options.parts.empty()) throw UsageError("merge needs at least one part directory");
  if (options.output_dir.empty()) throw UsageError("merge needs an output directory (-o DIR)");
  const fs::path output = fs::absolute(fs::path(options.output_dir).lexically_normal());
  std::error_code error;
  if (fs::exists(output, error))
    throw Error(options.output_dir, "", "already exists; merge writes a new dataset directory");
  std::vector<detail::DatasetPart> parts;
  for (const auto& dir : options.parts) parts.push_back(detail::read_part(dir));
  order_parts(parts);
  for (std::size_t p = 1; p < parts.size(); ++p) detail::check_same_layout(parts.front(), parts[p]);
  const shard::Manifest merged = detail::combine_parts(parts);

  // Built in a hidden directory beside the output and renamed into place at the end: a merge
  // killed at any point leaves the parts as they were and either no output or the whole of it.
  // A leftover staging directory (a killed merge) holds only links and is removed.
  fs::create_directories(output.parent_path(), error);
  if (options.copy) check_copied_bytes(parts, output.parent_path());
  const fs::path staging = staging_dir(output);
  const int lock = ::open(output.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock < 0 || ::flock(lock, LOCK_EX | LOCK_NB) != 0) {
    if (lock >= 0) ::close(lock);
    throw Error(output.parent_path().string(), "",
                "cannot lock the directory (another merge is writing here?)");
  }
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock};
  fs::remove_all(staging, error);
  fs::create_directory(staging, error);
  if (error) throw Error(staging.string(), "", "cannot create: " + error.message());
  const auto durability = detail::durability_for(options.fsync);
  MergeResult result;
  try {
    std::size_t k = 0;
    for (const auto& part : parts)
      for (const auto& shard : part.manifest.shards) {
        result.copied_bytes +=
            place_shard(fs::path(part.dir) / shard.file, staging / merged.shards[k].file,
                        options.copy, options.output_dir, durability);
        result.bytes += shard.bytes;
        ++k;
      }
    detail::write_file_atomic((staging / shard::kManifestName).string(),
                              shard::manifest_to_text(merged), durability);
    // (Writing the manifest synced the staging folder: the links made before it too.)
    fs::rename(staging, output, error);
    if (error) throw Error(options.output_dir, "", "cannot rename into place: " + error.message());
    detail::sync_directory(output.parent_path().string(), durability);
  } catch (...) {
    fs::remove_all(staging, error);
    throw;
  }
  result.output_dir = options.output_dir;
  result.parts = parts.size();
  result.rows = merged.rows;
  result.shards = merged.shards.size();
  return result;
}

std::string MergeResult::to_text() const {
  std::string text = "merged " + std::to_string(parts) + " parts into " + output_dir + ": " +
                     std::to_string(rows) + " rows in " + std::to_string(shards) + " shards (" +
                     std::to_string(bytes) + " bytes, ";
  text +=
      copied_bytes ? std::to_string(copied_bytes) + " bytes copied)" : "hard-linked, none copied)";
  return text;
}

std::string MergeResult::to_json() const {
  Json json;
  json["ok"] = true;
  json["output"] = output_dir;
  json["parts"] = parts;
  json["rows"] = rows;
  json["shards"] = shards;
  json["bytes"] = bytes;
  json["copied_bytes"] = copied_bytes;
  return json.dump(2);
}

}  // namespace gpucache
