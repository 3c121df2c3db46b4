#include "output_budget.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "gpucache/common/checked_math.hpp"
#include "gpucache/error.hpp"
#include "gpucache/progress.hpp"
#include "gpucache/shard/dataset_files.hpp"
#include "gpucache/shard_io/shard_writer.hpp"
#include "output_dir.hpp"

namespace gpucache::detail {

namespace {

namespace fs = std::filesystem;

// Room left beside the shards for the manifest, the pack plan and the file system's own
// bookkeeping: 1 MiB, and 1 KiB for each shard's entries in the manifest and the plan.
constexpr std::uint64_t kMarginBytes = 1ull << 20;
constexpr std::uint64_t kMarginBytesPerShard = 1024;

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return checked_add(a, b).value_or(UINT64_MAX);
}

std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  return checked_mul(a, b).value_or(UINT64_MAX);
}

// Rows a source can contribute at most once --max-rows and --sample have taken their share
// (validation rounds sample_fraction × valid rows to nearest; the ceiling bounds that).
std::uint64_t rows_kept_at_most(std::uint64_t rows, const ValidationOptions& rules) {
  if (rules.max_rows_per_source) rows = std::min(rows, *rules.max_rows_per_source);
  if (rules.sample_fraction && *rules.sample_fraction < 1.0)
    rows = std::min(rows, static_cast<std::uint64_t>(
                              std::ceil(*rules.sample_fraction * static_cast<double>(rows))));
  return rows;
}

// The dataset files already in `dir` (shards, manifest, plan, temporaries): --force removes them
// before writing and --resume keeps the complete shards, so their bytes are free for this run.
std::uint64_t replaced_dataset_bytes(const std::string& dir) {
  std::uint64_t bytes = 0;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (!shard::is_dataset_file(it->path().filename().string())) continue;
    std::error_code size_error;
    const auto size = it->is_regular_file(size_error) ? it->file_size(size_error) : 0;
    if (!size_error) bytes = saturating_add(bytes, size);
  }
  return bytes;
}

std::string bytes_text(std::uint64_t bytes) {
  return format_bytes(static_cast<double>(bytes)) + " (" + std::to_string(bytes) + " bytes)";
}

}  // namespace

std::uint64_t planned_shard_bytes(const std::vector<Column>& specs,
                                  const std::vector<ShardPlan>& plans) {
  std::uint64_t bytes = 0;
  for (const ShardPlan& plan : plans)
    bytes = saturating_add(bytes, shard::estimate_shard_bytes(specs, plan.rows, plan.value_bytes));
  return bytes;
}

OutputSize output_size_bound(const std::vector<Column>& specs, const PackInputs& inputs,
                             const PackOptions& options) {
  std::uint64_t row_bytes = 0;
  for (const auto& spec : specs)
    row_bytes = saturating_add(row_bytes, spec.variable_length() ? 8 : spec.row_pitch_bytes());
  OutputSize size;
  for (const auto& source : inputs.sources())
    size.rows = saturating_add(size.rows, rows_kept_at_most(source.rows, options.validation));
  size.bytes = saturating_mul(size.rows, row_bytes);
  size.before_validation = true;
  return size;
}

std::uint64_t free_output_bytes(const std::string& dir) {
  if (const char* fake = std::getenv("GPUCACHE_TEST_FREE_BYTES"); fake && *fake)
    return std::strtoull(fake, nullptr, 10);
  const std::string path = nearest_existing_directory(dir);
  struct statvfs stats {};
  if (::statvfs(path.c_str(), &stats) != 0)
    // Unknown free space does not stop a run: writing reports a full disk as it happens.
    return UINT64_MAX;
  return saturating_mul(static_cast<std::uint64_t>(stats.f_bavail),
                        static_cast<std::uint64_t>(stats.f_frsize));
}

void check_output_size(const OutputSize& size, const std::vector<std::string>& dataset_dirs,
                       const PackOptions& options) {
  const bool early = size.before_validation;
  const std::string rows = early ? "inputs' " + std::to_string(size.rows) + " rows"
                                 : std::to_string(size.rows) + " rows";
  const std::string output = (early ? "at least " : "") + bytes_text(size.bytes) + " of shards";
  const std::string counting = early ? " (if every row is kept; --max-output none checks only the "
                                       "exact output, after validation)"
                                     : "";
  if (size.bytes > options.max_output)
    throw Error(options.output_dir, "--max-output",
                "the " + rows + " make " + output + ", more than the cap of " +
                    bytes_text(options.max_output) + counting +
                    "; nothing was written: raise it with --max-output SIZE (or none) if this is "
                    "meant, or check the inputs for a repeated (stride-0) view");
  if (early && options.max_output == UINT64_MAX) return;
  // Free space is per file system: the splits of one output share one unless a split's folder is
  // a mount point, so the check compares the whole output with the space of each directory.
  std::uint64_t replaced = 0;
  if (options.force || options.resume)
    for (const auto& dir : dataset_dirs)
      replaced = saturating_add(replaced, replaced_dataset_bytes(dir));
  for (const auto& dir : dataset_dirs)
    check_free_space(size.bytes, free_space_margin(size.shards), dir,
                     "the " + rows + " make " + output, counting, replaced);
}

std::uint64_t free_space_margin(std::uint64_t shards) {
  return saturating_add(kMarginBytes, saturating_mul(shards, kMarginBytesPerShard));
}

void check_free_space(std::uint64_t bytes, std::uint64_t margin, const std::string& dir,
                      const std::string& what, const std::string& note,
                      std::uint64_t replaced_bytes) {
  const std::uint64_t free = saturating_add(free_output_bytes(dir), replaced_bytes);
  const std::uint64_t usable = free > margin ? free - margin : 0;
  if (bytes > usable)
    throw Error(dir, "free space",
                what + " but the file system holding it has " + bytes_text(free) + " free (" +
                    (replaced_bytes ? "counting the " + format_bytes(double(replaced_bytes)) +
                                          " of dataset files the run replaces, "
                                    : "") +
                    format_bytes(double(margin)) + " of it kept as margin)" + note +
                    "; nothing was written: free space there or choose another output directory");
}

std::vector<std::string> output_dataset_dirs(const PackOptions& options) {
  if (options.splits.empty()) return {options.output_dir};
  std::vector<std::string> dirs;
  for (const auto& split : options.splits)
    dirs.push_back((fs::path(options.output_dir) / split.name).string());
  return dirs;
}

void check_output_bound(const std::vector<Column>& specs, const PackInputs& inputs,
                        const PackOptions& options) {
  check_output_size(output_size_bound(specs, inputs, options), output_dataset_dirs(options),
                    options);
}

void check_planned_output(const std::vector<Column>& specs,
                          const std::vector<const std::vector<ShardPlan>*>& datasets,
                          const PackOptions& options) {
  OutputSize size;
  for (const auto* plans : datasets) {
    for (const ShardPlan& plan : *plans) size.rows += plan.rows;
    size.shards += plans->size();
    size.bytes = saturating_add(size.bytes, planned_shard_bytes(specs, *plans));
  }
  check_output_size(size, output_dataset_dirs(options), options);
}

}  // namespace gpucache::detail
