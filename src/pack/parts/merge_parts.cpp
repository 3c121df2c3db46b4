#include "merge_parts.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/shard/dataset_check.hpp"
#include "gpucache/shard/dataset_open.hpp"

namespace gpucache::detail {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string describe(const Column& column) {
  std::string shape;
  for (auto extent : column.row_shape)
    shape += (shape.empty() ? "" : ", ") + std::to_string(extent);
  return "'" + column.name + "' " + std::string(column_kind_name(column.kind)) + " " +
         std::string(dtype_name(column.dtype)) + " [" + shape + "] padded to " +
         std::to_string(column.padded_dim);
}

std::uint64_t count_of(const Json& section, const char* key) {
  const auto it = section.find(key);
  return it != section.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

// Adds every number of `from` to `into`, key by key (drop counts by reason).
void add_counts(Json& into, const Json& from) {
  if (!from.is_object()) return;
  for (const auto& [key, value] : from.items())
    if (value.is_number_unsigned())
      into[key] = count_of(into, key.c_str()) + value.get<std::uint64_t>();
}

// Norm statistics of several parts as one pack of their rows would record them: counts and
// histogram counts add up (the bin edges depend only on the options, which agree), min and max
// are the extremes, the mean is weighted by the counts.
void add_norm_stats(Json& into, const Json& from) {
  if (!from.is_object()) return;
  for (const auto& [column, stats] : from.items()) {
    if (!into.contains(column)) {
      into[column] = stats;
      continue;
    }
    Json& total = into[column];
    const double a = static_cast<double>(count_of(total, "count"));
    const double b = static_cast<double>(count_of(stats, "count"));
    if (b == 0) continue;
    if (a == 0) {
      total = stats;
      continue;
    }
    total["mean"] = (total["mean"].get<double>() * a + stats["mean"].get<double>() * b) / (a + b);
    total["min"] = std::min(total["min"].get<double>(), stats["min"].get<double>());
    total["max"] = std::max(total["max"].get<double>(), stats["max"].get<double>());
    total["count"] = count_of(total, "count") + count_of(stats, "count");
    Json& histogram = total["histogram"];
    if (histogram["edges"] == stats["histogram"]["edges"])
      for (std::size_t k = 0; k < histogram["counts"].size(); ++k)
        histogram["counts"][k] = histogram["counts"][k].get<std::uint64_t>() +
                                 stats["histogram"]["counts"][k].get<std::uint64_t>();
  }
}

// Where a part's inputs go in the merged list: a --part pack records the first input of its
// share (its `source` column already counts from there); any other dataset goes at the end.
std::uint64_t first_input(const DatasetPart& part, std::uint64_t merged_inputs) {
  const auto& sections = part.manifest.sections;
  if (sections.contains("part") && sections["part"].contains("first_input"))
    return sections["part"]["first_input"].get<std::uint64_t>();
  return merged_inputs;
}

}  // namespace

DatasetPart read_part(const std::string& dir) {
  DatasetPart part;
  part.dir = dir;
  // Listed: the shards the manifest lists, each at its size; unlisted shard files (a killed
  // append's) are no part of the dataset and are left alone.
  auto opened = shard::open_dataset(dir, shard::OpenMode::listed);
  part.manifest = std::move(*opened.manifest);
  part.manifest_hash = std::move(opened.recorded_hash);
  part.unlisted = std::move(opened.unlisted);
  // Every shard's header (the hash of which covers its tables and data) must be the one the
  // manifest records, at its place: merge then vouches for the parts as their manifests did.
  std::vector<shard::DatasetProblem> problems;
  std::uint64_t first_id = 0;
  for (std::size_t i = 0; i < part.manifest.shards.size(); ++i) {
    const auto& entry = part.manifest.shards[i];
    const std::string path = (fs::path(dir) / entry.file).string();
    const auto file = MappedFile::open(path);
    const shard::Layout layout = shard::decode_layout(file->bytes(), path);
    if (!layout.header.has_dataset_fields())
      throw Error(path, "header", "is a version 1.0 shard without dataset fields: repack to merge");
    if (i == 0) first_id = layout.header.dataset_id;
    shard::check_shard_against_manifest({entry.file, &layout}, part.manifest, i, problems);
    shard::throw_first(problems, dir);
  }
  part.segments = part.manifest.segments;
  if (part.segments.empty())
    part.segments.push_back({0, static_cast<std::uint32_t>(part.manifest.shards.size()), 0,
                             part.manifest.rows, first_id});
  return part;
}

Json comparable_options(const Json& options) {
  Json comparable = options;
  if (comparable.is_object()) comparable.erase("part");
  return comparable;
}

Json compared_options(const Json& options) {
  Json compared = comparable_options(options);
  if (compared.is_object())
    for (const char* key : kAskedStorageOptions) compared.erase(key);
  return compared;
}

void check_same_options(const Json& expected, const Json& got, const std::string& where,
                        const std::string& expected_name, const std::string& got_name) {
  // Compared as unordered objects: the same options may be written in another key order.
  const auto unordered = [](const Json& options) {
    return nlohmann::json::parse(compared_options(options).dump());
  };
  const nlohmann::json a = unordered(expected), b = unordered(got);
  if (a == b) return;
  // Name the first differing option, one level deep for the validation rules.
  for (const auto& [key, value] : a.items()) {
    const nlohmann::json other = b.contains(key) ? b[key] : nlohmann::json(nullptr);
    if (other == value) continue;
    // The per-column checks follow from the other rules: a difference in those is named first.
    if (value.is_object() && other.is_object())
      for (const bool derived : {false, true})
        for (const auto& [inner, inner_value] : value.items())
          if ((inner == "columns") == derived &&
              (!other.contains(inner) || other[inner] != inner_value))
            throw Error(where, "options",
                        "option " + key + "." + inner + " is " + inner_value.dump() + " in " +
                            expected_name + " but " +
                            (other.contains(inner) ? other[inner].dump() : "unset") + " in " +
                            got_name);
    throw Error(where, "options",
                "option " + key + " is " + value.dump() + " in " + expected_name + " but " +
                    other.dump() + " in " + got_name);
  }
  for (const auto& [key, value] : b.items())
    if (!a.contains(key))
      throw Error(where, "options",
                  "option " + key + " is " + value.dump() + " in " + got_name + " but unset in " +
                      expected_name);
  throw Error(where, "options", "the options differ from " + expected_name + "'s");
}

void check_same_layout(const DatasetPart& first, const DatasetPart& other) {
  const auto& a = first.manifest.columns;
  const auto& b = other.manifest.columns;
  for (std::size_t c = 0; c < std::max(a.size(), b.size()); ++c) {
    if (c < a.size() && c < b.size() && a[c] == b[c]) continue;
    // The same column stored in another dtype: say which option stores it as the other does.
    if (c < a.size() && c < b.size() && a[c].name == b[c].name && a[c].kind == b[c].kind &&
        a[c].dtype != b[c].dtype) {
      const std::string stored(dtype_name(a[c].dtype)), got(dtype_name(b[c].dtype));
      // The --dtype that would store it so exists only where the dtype table allows the
      // conversion (f16 -> f32); f32 rows never become f64 (gpucache never widens unasked, and
      // f64 is no conversion target), so then the rows must come as the dataset holds them.
      const std::string fix = dtype_conversion(b[c].dtype, a[c].dtype)
                                  ? "pack with --dtype " + b[c].name + "=" + stored +
                                        " to store it as " + first.dir + " does"
                                  : got + " values cannot be stored as " + stored +
                                        ": give the rows as " + stored + " values, or repack " +
                                        first.dir + " with --dtype " + b[c].name + "=" + got;
      throw Error(other.dir, "column '" + b[c].name + "'",
                  "is stored as " + got + " but in " + first.dir + " as " + stored + " (" +
                      describe(b[c]) + " against " + describe(a[c]) + "); " + fix);
    }
    throw Error(other.dir, "columns",
                c >= b.size() ? "has no column " + describe(a[c]) + ", which " + first.dir + " has"
                : c >= a.size()
                    ? "has column " + describe(b[c]) + ", which " + first.dir + " does not have"
                    : "column " + std::to_string(c) + " is " + describe(b[c]) + " but in " +
                          first.dir + " it is " + describe(a[c]));
  }
  if (first.manifest.roles != other.manifest.roles) {
    // Name the first column whose role differs (an --input-map entry's "roles", say).
    const auto& ra = first.manifest.roles;
    const auto& rb = other.manifest.roles;
    for (std::size_t c = 0; c < std::min({ra.size(), rb.size(), a.size()}); ++c)
      if (ra[c] != rb[c])
        throw Error(other.dir, "column '" + a[c].name + "'",
                    "is a " + std::string(column_role_name(rb[c])) + " column but in " + first.dir +
                        " a " + std::string(column_role_name(ra[c])) +
                        " column; map it with the role " + std::string(column_role_name(ra[c])) +
                        " (--role " + a[c].name + "=" + std::string(column_role_name(ra[c])) +
                        ", or \"roles\" in its --input-map entry)");
    throw Error(other.dir, "columns", "the columns' roles differ from " + first.dir + "'s");
  }
  // Dates and times: the same i64 means another instant under another unit or time zone.
  for (std::size_t c = 0; c < a.size(); ++c) {
    auto time_of = [c](const shard::Manifest& manifest) -> std::string {
      return c < manifest.times.size() && manifest.times[c] ? describe_time(*manifest.times[c])
                                                            : "plain i64";
    };
    const std::string expected = time_of(first.manifest), got = time_of(other.manifest);
    if (expected != got)
      throw Error(other.dir, "columns",
                  "column '" + a[c].name + "' holds " + got + " values but in " + first.dir +
                      " it holds " + expected +
                      " values; convert them to the dataset's unit and time zone first");
  }
  check_same_options(first.manifest.options, other.manifest.options, other.dir, first.dir,
                     other.dir);
}

shard::Manifest combine_parts(const std::vector<DatasetPart>& parts) {
  shard::Manifest merged;
  merged.tool_version = GPUCACHE_VERSION;
  merged.columns = parts.front().manifest.columns;
  merged.roles = parts.front().manifest.roles;
  merged.times = parts.front().manifest.times;
  merged.options = comparable_options(parts.front().manifest.options);
  Json provenance = Json::array(), dropped = Json::object(), norms = Json::object(),
       null_rows = Json::object(), sources = Json::array();
  std::uint64_t rows_checked = 0, sampled_out = 0, clamped = 0;
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const DatasetPart& part = parts[p];
    const shard::Manifest& manifest = part.manifest;
    const std::uint64_t first_shard = merged.shards.size(), first_row = merged.rows;
    for (const auto& shard : manifest.shards) {
      shard::ManifestShard placed = shard;
      placed.file = shard::shard_file_name(static_cast<std::uint32_t>(merged.shards.size()));
      placed.first_row += first_row;
      merged.shards.push_back(std::move(placed));
    }
    for (auto segment : part.segments) {
      segment.first_shard += first_shard;
      segment.first_row += first_row;
      merged.segments.push_back(segment);
    }
    merged.rows += manifest.rows;
    const std::uint64_t input_base = first_input(part, merged.inputs.size());
    for (std::size_t i = 0; i < manifest.inputs.size(); ++i) {
      const std::uint64_t at = input_base + i;
      if (at > merged.inputs.size())
        throw Error(part.dir, "part",
                    "its inputs start at input " + std::to_string(input_base) +
                        " but the parts before it list only " +
                        std::to_string(merged.inputs.size()) + ": a part is missing");
      if (at == merged.inputs.size()) {
        merged.inputs.push_back(manifest.inputs[i]);
      } else if (merged.inputs[at].path != manifest.inputs[i].path ||
                 merged.inputs[at].xxh3 != manifest.inputs[i].xxh3) {
        throw Error(part.dir, "inputs[" + std::to_string(i) + "]",
                    manifest.inputs[i].path + " differs from input " + std::to_string(at) + " (" +
                        merged.inputs[at].path +
                        ") of an earlier part: the parts come from "
                        "different input sets");
      }
    }
    const auto& sections = manifest.sections;
    // A part that is itself a merge contributes the parts it names.
    if (sections.contains("merge") && sections["merge"].contains("parts")) {
      for (Json entry : sections["merge"]["parts"]) {
        entry["first_shard"] = entry["first_shard"].get<std::uint64_t>() + first_shard;
        entry["first_row"] = entry["first_row"].get<std::uint64_t>() + first_row;
        provenance.push_back(entry);
      }
    } else {
      Json entry;
      entry["path"] = part.dir;
      entry["part"] =
          sections.contains("part")
              ? Json({{"index", sections["part"]["index"]}, {"count", sections["part"]["count"]}})
              : Json(nullptr);
      entry["manifest_hash"] = part.manifest_hash;
      entry["tool_version"] = manifest.tool_version;
      entry["first_shard"] = first_shard;
      entry["shards"] = manifest.shards.size();
      entry["first_row"] = first_row;
      entry["rows"] = manifest.rows;
      entry["first_input"] = input_base;
      entry["inputs"] = manifest.inputs.size();
      entry["rows_checked"] = count_of(sections, "rows_checked");
      entry["dropped"] = sections.contains("dropped") ? sections["dropped"] : Json::object();
      entry["sampled_out"] = count_of(sections, "sampled_out");
      provenance.push_back(entry);
    }
    rows_checked += count_of(sections, "rows_checked");
    sampled_out += count_of(sections, "sampled_out");
    clamped += count_of(sections, "clamped_rows");
    if (sections.contains("dropped")) add_counts(dropped, sections["dropped"]);
    if (sections.contains("null_rows")) add_counts(null_rows, sections["null_rows"]);
    if (sections.contains("norm_stats")) add_norm_stats(norms, sections["norm_stats"]);
    if (sections.contains("sources"))
      for (Json source : sections["sources"]) {
        source["part"] = p;
        sources.push_back(source);
      }
  }
  const auto& first_sections = parts.front().manifest.sections;
  if (first_sections.contains("validated_columns"))
    merged.sections["validated_columns"] = first_sections["validated_columns"];
  merged.sections["rows_checked"] = rows_checked;
  merged.sections["dropped"] = dropped;
  merged.sections["sampled_out"] = sampled_out;
  merged.sections["clamped_rows"] = clamped;
  merged.sections["sources"] = sources;
  merged.sections["norm_stats"] = norms;
  if (!null_rows.empty()) merged.sections["null_rows"] = null_rows;
  const auto& validation =
      merged.options.contains("validation") ? merged.options["validation"] : Json::object();
  // Checks that need every row at once ran within each part; docs/scale.md says why.
  merged.sections["merge"] = {{"parts", provenance},
                              {"dedup", validation.value("dedup", false) ? "per part" : "off"},
                              {"shuffle", validation.value("shuffle", false) ? "per part" : "off"}};
  return merged;
}

}  // namespace gpucache::detail
