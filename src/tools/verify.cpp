#include "gpucache/verify.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gpucache/common/mapped_file.hpp"
#include "gpucache/common/parallel.hpp"
#include "gpucache/error.hpp"
#include "gpucache/progress.hpp"
#include "gpucache/remote/remote.hpp"
#include "gpucache/shard/chunks.hpp"
#include "gpucache/shard/dataset_check.hpp"
#include "gpucache/shard/dataset_open.hpp"
#include "gpucache/shard_io/shard_reader.hpp"
#include "verify_deep.hpp"

namespace gpucache {
namespace {

namespace fs = std::filesystem;

struct OpenShard {
  std::string name;  // as reported
  std::shared_ptr<const detail::MappedFile> file;
  shard::Layout layout;
};

Problem problem(std::string file, std::string location, std::string cause) {
  return {std::move(file), std::move(location), std::move(cause), std::nullopt, std::nullopt};
}

std::string range_text(std::uint64_t begin, std::uint64_t end) {
  return "bytes " + std::to_string(begin) + "-" + std::to_string(end);
}

// For a raw chunk that failed its hash, finds a non-zero byte where the format requires zeros:
// row padding or the gaps between column regions.
std::optional<std::uint64_t> find_nonzero_padding(const OpenShard& shard, std::uint64_t begin,
                                                  std::uint64_t end, std::string& where) {
  const auto bytes = shard.file->bytes();
  std::vector<std::pair<std::uint64_t, std::uint64_t>> used;  // [begin, end) of column bytes
  for (const auto& column : shard.layout.columns) {
    if (column.variable_length()) {
      used.emplace_back(column.data_offset, column.data_offset + column.data_size);
      used.emplace_back(column.aux_offset, column.aux_offset + column.aux_size);
      continue;
    }
    used.emplace_back(column.data_offset, column.data_offset + column.data_size);
    if (!column.padded()) continue;
    // Padding ends every innermost run of dim() values: a row holds row_pitch / inner_pitch runs.
    const std::uint64_t itemsize = dtype_size(column.dtype);
    const std::uint64_t inner_pitch = column.padded_dim * itemsize;
    const std::uint64_t runs_per_row = column.row_pitch_bytes() / inner_pitch;
    const std::uint64_t runs = shard.layout.header.row_count * runs_per_row;
    const std::uint64_t run_first =
        begin > column.data_offset ? (begin - column.data_offset) / inner_pitch : 0;
    for (std::uint64_t run = run_first; run < runs; ++run) {
      const std::uint64_t pad_begin =
          column.data_offset + run * inner_pitch + column.dim() * itemsize;
      const std::uint64_t pad_end = column.data_offset + (run + 1) * inner_pitch;
      if (pad_begin > end) break;
      for (std::uint64_t at = std::max(pad_begin, begin); at < std::min(pad_end, end + 1); ++at)
        if (bytes[at] != std::byte{0}) {
          where =
              "column '" + column.name + "' row " + std::to_string(run / runs_per_row) + " padding";
          return at;
        }
    }
  }
  std::sort(used.begin(), used.end());
  std::uint64_t cursor = shard.layout.header.data_offset;
  used.emplace_back(shard.layout.header.data_offset + shard.layout.header.data_size, 0);
  for (const auto& [region_begin, region_end] : used) {
    for (std::uint64_t at = std::max(cursor, begin); at < std::min(region_begin, end + 1); ++at)
      if (bytes[at] != std::byte{0}) {
        where = "alignment padding between columns";
        return at;
      }
    cursor = std::max(cursor, region_end);
  }
  return std::nullopt;
}

void check_text_offsets(const OpenShard& shard, std::vector<Problem>& problems) {
  if (shard.layout.header.compressed()) return;  // checked by readers after decompression
  for (const auto& column : shard.layout.columns) {
    if (!column.variable_length()) continue;
    const std::uint64_t rows = shard.layout.header.row_count;
    const auto bad = shard::find_bad_offset(shard.file->data() + column.data_offset, rows,
                                            shard::offset_limit(column), true);
    if (!bad) continue;
    const std::uint64_t at = column.data_offset + *bad * 8;
    const Error error = shard::bad_offset_error(shard.name, column, 0, *bad, at);
    Problem found = problem(shard.name, "column '" + column.name + "' row " + std::to_string(*bad),
                            error.cause());
    found.byte_begin = at;
    found.byte_end = at + 7;
    problems.push_back(found);
  }
}

// Structural checks of one shard; returns it opened when the layout is sound.
std::optional<OpenShard> open_shard(const fs::path& path, const std::string& name,
                                    std::vector<Problem>& problems) {
  OpenShard shard;
  shard.name = name;
  try {
    shard.file = detail::MappedFile::open(path.string());
    shard.layout = shard::decode_layout(shard.file->bytes(), name);
  } catch (const Error& error) {
    problems.push_back(problem(name, error.location(), error.cause()));
    return std::nullopt;
  }
  return shard;
}

void add_problems(const std::vector<shard::DatasetProblem>& found, std::vector<Problem>& problems) {
  for (const auto& each : found) problems.push_back(problem(each.file, each.location, each.cause));
}

}  // namespace

VerifyReport verify(const std::string& path, const VerifyOptions& options) {
  if (remote::is_remote_path(path)) {
    // Each shard is fetched (every chunk checked on arrival) or reused from the cache, then every
    // byte of the cached copy is checked as for a local dataset. A shard that cannot be fetched
    // right is a problem naming its URL and byte range.
    const auto copy = remote::RemoteDataset::open(path, {options.cache_dir, 0});
    std::vector<Problem> fetch_problems;
    std::vector<std::string> not_fetched;
    for (std::size_t k = 0; k < copy->shard_count(); ++k) {
      try {
        copy->fetch_shards({k});
      } catch (const Error& error) {
        fetch_problems.push_back(problem(error.file(), error.location(), error.cause()));
        not_fetched.push_back(copy->shard_name(k));
      }
    }
    VerifyReport report = verify(copy->local_dir(), options);
    report.path = path;
    // A shard that could not be fetched is missing from the cache: said once, by its URL.
    std::erase_if(report.problems, [&](const Problem& found) {
      return std::find(not_fetched.begin(), not_fetched.end(), found.file) != not_fetched.end() &&
             found.cause.rfind("missing", 0) == 0;
    });
    report.problems.insert(report.problems.begin(), fetch_problems.begin(), fetch_problems.end());
    return report;
  }
  VerifyReport report;
  report.path = path;
  std::error_code error;
  if (!fs::exists(path, error)) throw Error(path, "", "does not exist");
  std::vector<OpenShard> shards;
  auto& problems = report.problems;
  std::optional<shard::Manifest> deep_manifest;  // kept for the --deep pass

  if (!fs::is_directory(path, error)) {
    if (auto shard = open_shard(path, fs::path(path).filename().string(), problems))
      shards.push_back(std::move(*shard));
  } else {
    // Audit: the strict checks of the manifest and the shard set, every problem listed.
    const fs::path dir(path);
    auto opened = shard::open_dataset(path, shard::OpenMode::audit);
    add_problems(opened.problems, problems);
    if (opened.manifest) {
      deep_manifest = opened.manifest;
      const shard::Manifest& manifest = *opened.manifest;
      std::vector<shard::DatasetProblem> found;
      for (std::size_t i = 0; i < manifest.shards.size(); ++i) {
        const auto& listed = manifest.shards[i];
        // A missing one is reported by the opener; one of another size is opened all the same,
        // so that its header and chunks say what happened to it.
        if (!std::binary_search(opened.shard_files.begin(), opened.shard_files.end(), listed.file))
          continue;
        if (auto shard = open_shard(dir / listed.file, listed.file, problems)) {
          found.clear();
          shard::check_shard_against_manifest({shard->name, &shard->layout}, manifest, i, found);
          add_problems(found, problems);
          shards.push_back(std::move(*shard));
        }
      }
    } else {
      for (const auto& name : opened.shard_files)
        if (auto shard = open_shard(dir / name, name, problems))
          shards.push_back(std::move(*shard));
    }
  }

  // Chunk hashes of every shard, all in one parallel pass.
  struct Task {
    std::size_t shard;
    std::uint64_t chunk;
  };
  std::vector<Task> tasks;
  std::uint64_t total_bytes = 0;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    for (std::uint64_t k = 0; k < shards[s].layout.header.chunk_count; ++k) tasks.push_back({s, k});
    total_bytes += shards[s].layout.header.stored_data_size;
    shards[s].file->advise_sequential();
  }
  std::vector<std::optional<std::string>> outcomes(tasks.size());
  Progress progress(options.show_progress, "verify", total_bytes, options.progress_callback);
  detail::parallel_for_each(tasks.size(), options.threads, [&](std::uint64_t t) {
    const OpenShard& shard = shards[tasks[t].shard];
    try {
      const std::uint64_t computed =
          shard::chunk_hash(shard.file->bytes(), shard.layout, tasks[t].chunk, shard.name);
      if (computed != shard.layout.chunks[tasks[t].chunk].hash)
        outcomes[t] =
            shard::chunk_hash_error(shard.name, shard.layout, tasks[t].chunk, computed).cause();
    } catch (const Error& failure) {
      outcomes[t] = failure.cause();
    }
    // Checked bytes need not stay resident: a dataset larger than memory verifies in bounded RSS.
    const auto& checked = shard.layout.chunks[tasks[t].chunk];
    shard.file->release(checked.stored_offset, checked.stored_size);
    progress.advance(shard.layout.chunks[tasks[t].chunk].stored_size);
  });
  progress.finish();
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    if (!outcomes[t]) continue;
    const OpenShard& shard = shards[tasks[t].shard];
    const auto& header = shard.layout.header;
    const auto& chunk = shard.layout.chunks[tasks[t].chunk];
    const std::uint64_t logical_begin = header.data_offset + tasks[t].chunk * header.chunk_size;
    const std::uint64_t logical_end =
        logical_begin + shard::chunk_logical_size(header, tasks[t].chunk) - 1;
    Problem found =
        problem(shard.name, shard::describe_range(shard.layout, {logical_begin, logical_end + 1}),
                *outcomes[t]);
    found.byte_begin = chunk.stored_offset;
    found.byte_end = chunk.stored_offset + chunk.stored_size - 1;
    if (chunk.codec == shard::Codec::raw) {
      std::string where;
      if (auto at = find_nonzero_padding(shard, logical_begin, logical_end, where)) {
        found.location = where;
        found.cause = "non-zero byte where the format requires zero padding (" + *outcomes[t] + ")";
        found.byte_begin = found.byte_end = *at;
      }
    }
    problems.push_back(found);
  }
  if (options.deep && problems.empty() && deep_manifest)
    detail::check_recorded_rules(path, *deep_manifest, options, problems);
  for (const auto& shard : shards) {
    check_text_offsets(shard, problems);
    report.chunks_checked += shard.layout.header.chunk_count;
    report.bytes_checked += shard.file->size();
  }
  report.shards_checked = shards.size();
  return report;
}

std::string VerifyReport::to_json() const {
  nlohmann::ordered_json json;
  json["ok"] = ok();
  json["path"] = path;
  json["shards_checked"] = shards_checked;
  json["chunks_checked"] = chunks_checked;
  json["bytes_checked"] = bytes_checked;
  json["problems"] = nlohmann::ordered_json::array();
  for (const auto& found : problems) {
    nlohmann::ordered_json entry{
        {"file", found.file}, {"location", found.location}, {"cause", found.cause}};
    if (found.byte_begin) entry["byte_begin"] = *found.byte_begin;
    if (found.byte_end) entry["byte_end"] = *found.byte_end;
    json["problems"].push_back(entry);
  }
  return json.dump(2);
}

std::string VerifyReport::to_text() const {
  if (ok())
    return "ok: " + path + " is intact (" + std::to_string(shards_checked) + " shards, " +
           std::to_string(chunks_checked) + " chunks, " + std::to_string(bytes_checked) +
           " bytes checked)";
  std::string text = "CORRUPT: " + path + ": " + std::to_string(problems.size()) + " problem" +
                     (problems.size() == 1 ? "" : "s");
  for (const auto& found : problems) {
    text += "\n  " + found.file;
    if (found.byte_begin)
      text += " " + range_text(*found.byte_begin, found.byte_end.value_or(*found.byte_begin));
    if (!found.location.empty()) text += " (" + found.location + ")";
    text += ": " + found.cause;
  }
  return text;
}

}  // namespace gpucache
