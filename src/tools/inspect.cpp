#include "gpucache/inspect.hpp"
#include "gpucache/common/hash.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gpucache/error.hpp"
#include "gpucache/progress.hpp"
#include "gpucache/remote/remote.hpp"
#include "gpucache/shard/dataset_open.hpp"
#include "gpucache/validation_json.hpp"

namespace gpucache {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// Reads the header and column table of a shard with two small reads, not a whole mapping.
shard::Layout read_tables(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path, "", "cannot open");
  std::vector<std::byte> prefix(shard::kHeaderSize);
  auto read_at = [&](std::vector<std::byte>& out, std::uint64_t offset) {
    const auto done = ::pread(fd, out.data(), out.size(), static_cast<off_t>(offset));
    if (done != static_cast<ssize_t>(out.size())) {
      ::close(fd);
      throw Error(path, "header", "file is too short for a shard header (truncated?)");
    }
  };
  read_at(prefix, 0);
  prefix.resize(shard::kHeaderSize + shard::kFooterSize);  // decode_header wants room for a footer
  shard::Layout layout;
  try {
    layout.header = shard::decode_header(prefix, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (layout.header.column_count > 4096) {
    ::close(fd);
    throw Error(path, "header byte 44", "implausible column count");
  }
  std::vector<std::byte> table(*shard::column_tables_size(layout.header));
  read_at(table, shard::kHeaderSize);
  ::close(fd);
  if (detail::xxh3_64(table) != layout.header.columns_hash)
    throw Error(path, "column table", "column table hash mismatch: the table is corrupt");
  layout.columns = shard::decode_columns(table, layout.header, path);
  return layout;
}

Json column_json(const Column& column, std::uint64_t rows) {
  Json shape = Json::array({rows});
  for (std::uint64_t extent : column.row_shape) shape.push_back(extent);
  if (column.kind == ColumnKind::sequence) shape.push_back(nullptr);  // rows vary in length
  return {{"name", column.name},
          {"kind", column_kind_name(column.kind)},
          {"dtype", column.kind == ColumnKind::text ? "str" : dtype_name(column.dtype)},
          {"shape", shape},
          {"padded_dim", column.padded_dim},
          {"row_pitch_bytes", column.row_pitch_bytes()}};
}

// Whether gpucache.load(device="cpu") maps each tensor column across shards as one zero-copy
// array: every shard but the last must end each tensor column on a page boundary (SPEC.md, "Rows
// per shard").
bool shards_join_on_pages(const shard::Manifest& manifest) {
  for (std::size_t s = 0; s + 1 < manifest.shards.size(); ++s)
    for (const auto& column : manifest.columns)
      if (column.kind == ColumnKind::tensor &&
          manifest.shards[s].rows * column.row_pitch_bytes() % shard::kAlignment != 0)
        return false;
  return true;
}

// JSON has no infinity: an open upper bound is "inf", as in the manifest.
Json bound_json(double bound) {
  return std::isinf(bound) ? Json("inf") : Json(bound);
}

// Each column's recorded checks ("checks", and "norm_range" with the norm check), from the
// manifest's validation rules and validated columns. A manifest without them (or whose rules do
// not read) leaves the columns as they are: verify reports such rules.
void add_checks(Json& columns, const shard::Manifest& manifest) {
  if (!manifest.sections.contains("validated_columns") || !manifest.options.contains("validation"))
    return;
  std::vector<ColumnChecks> checks;
  try {
    std::vector<std::string> validated;
    for (const auto& name : manifest.sections["validated_columns"])
      if (name.is_string()) validated.push_back(name.get<std::string>());
    checks = resolve_column_checks(
        validation_options_from_json(manifest.options["validation"], shard::kManifestName),
        validated);
  } catch (const Error&) {
    return;
  }
  for (auto& column : columns) {
    const auto found = std::find_if(checks.begin(), checks.end(), [&](const ColumnChecks& c) {
      return c.column == column["name"].get<std::string>();
    });
    Json names = Json::array();
    if (found == checks.end()) {
      column["checks"] = names;
      continue;
    }
    for (const auto& info : kChecks)
      if (found->checks.has(info.check)) names.push_back(std::string(info.name));
    column["checks"] = names;
    if (found->checks.has(Check::norm))
      column["norm_range"] =
          Json::array({bound_json(found->norm_min), bound_json(found->norm_max)});
  }
}

// "finite, nonzero, norm in [0.1, 100]" from a column's "checks" and "norm_range".
std::string checks_text(const Json& column) {
  std::string text;
  for (const auto& name : column["checks"]) {
    text += (text.empty() ? "" : ", ") + name.get<std::string>();
    if (name == "norm" && column.contains("norm_range")) {
      const auto& range = column["norm_range"];
      auto bound = [](const Json& value) {
        if (value.is_string()) return value.get<std::string>();
        char number[32];
        std::snprintf(number, sizeof number, "%g", value.get<double>());
        return std::string(number);
      };
      text += " in [" + bound(range[0]) + ", " + bound(range[1]) + "]";
    }
  }
  return text.empty() ? "none" : text;
}

std::string render_text(const Json& json) {
  std::string text = json.value("path", "") + ": " +
                     std::to_string(json["rows"].get<std::uint64_t>()) + " rows in " +
                     std::to_string(json["shards"].size()) + " shard" +
                     (json["shards"].size() == 1 ? "" : "s") + "\n";
  if (json.contains("warning")) text += "warning: " + json["warning"].get<std::string>() + "\n";
  text += "\ncolumns:\n";
  for (const auto& column : json["columns"]) {
    std::string shape;
    for (const auto& extent : column["shape"])
      shape += (shape.empty() ? "" : ", ") +
               (extent.is_null() ? std::string("*") : std::to_string(extent.get<std::uint64_t>()));
    std::string detail =
        column["kind"] == "text" ? "UTF-8 text"
        : column["kind"] == "sequence"
            ? "values of varying length"
            : "pitch " + std::to_string(column["row_pitch_bytes"].get<std::uint64_t>()) + " bytes";
    if (column.contains("role")) detail = column["role"].get<std::string>() + ", " + detail;
    if (column.contains("time")) {  // "timestamp[us, UTC], tensor, pitch 8 bytes"
      const Json& time = column["time"];
      std::string type = time["kind"].get<std::string>() + "[" + time["unit"].get<std::string>();
      if (time["tz"].is_string()) type += ", " + time["tz"].get<std::string>();
      detail = type + "], " + detail;
    }
    if (column.contains("offset"))
      detail += " at offset " + std::to_string(column["offset"].get<std::uint64_t>());
    if (column.contains("checks")) detail += "; checks: " + checks_text(column);
    char line[256];
    std::snprintf(line, sizeof line, "  %-20s %-6s [%s]  ",
                  column["name"].get<std::string>().c_str(),
                  column["dtype"].get<std::string>().c_str(), shape.c_str());
    text += line + detail + "\n";
  }
  if (json.contains("cpu_zero_copy"))
    text += json["cpu_zero_copy"].get<bool>()
                ? "\ncpu load: one zero-copy tensor per column (shards end on page boundaries)\n"
                : "\ncpu load: columns spanning shards are joined with a copy (shards do not end "
                  "on page boundaries; repack without --shard-rows to avoid it)\n";
  const auto& bytes = json["bytes"];
  text += "\nbytes: logical " + format_bytes(bytes["logical"].get<double>(), 2) + ", padded " +
          format_bytes(bytes["padded"].get<double>(), 2) + ", on disk " +
          format_bytes(bytes["on_disk"].get<double>(), 2) + "\n";
  if (json.contains("provenance")) {
    const auto& provenance = json["provenance"];
    text += "\nmade by gpucache " + provenance.value("tool_version", std::string("?")) + " from:\n";
    for (const auto& input : provenance["inputs"])
      text += "  " + input["path"].get<std::string>() + " (" +
              format_bytes(input["bytes"].get<double>(), 2) + ", xxh3 " +
              input["xxh3"].get<std::string>() + ")\n";
    text += "options: " + provenance["options"].dump() + "\n";
  }
  if (json.contains("split")) {
    const auto& split = json["split"];
    std::string counts;
    if (split.contains("by")) {
      // --split-by: the datasets of the column's values.
      for (const auto& [name, rows] : split["rows"].items())
        counts += (counts.empty() ? "" : ", ") + name + " " +
                  std::to_string(rows.get<std::uint64_t>()) + " rows";
      text += "\nsplit: " + split["name"].get<std::string>() + " (" +
              split["by"].get<std::string>() + " = " + split["value"].dump() + ") of " + counts +
              "\n";
    } else {
      for (const auto& [name, rows] : split["rows"].items())
        counts += (counts.empty() ? "" : ", ") + name + " " +
                  std::to_string(rows.get<std::uint64_t>()) + " rows (" +
                  split["fractions"][name].dump() + ")";
      text += "\nsplit: " + split["name"].get<std::string>() + " of " + counts + ", seed " +
              std::to_string(split["seed"].get<std::uint64_t>()) + "\n";
    }
  }
  if (json.contains("part")) {
    const auto& part = json["part"];
    text += "\npart " + part["index"].dump() + " of " + part["count"].dump() + " (" +
            (part.value("rule", std::string()) == "rows" ? "row ranges" : "whole files") + " of " +
            part["inputs_total"].dump() + " inputs); join the parts with gpucache merge\n";
  }
  if (json.contains("merge")) {
    const auto& merge = json["merge"];
    text += "\nmerged from " + std::to_string(merge["parts"].size()) + " parts:\n";
    for (const auto& part : merge["parts"]) {
      const std::string which =
          part["part"].is_object()
              ? " (part " + part["part"]["index"].dump() + "/" + part["part"]["count"].dump() + ")"
              : "";
      text += "  " + part["path"].get<std::string>() + which + ": " + part["rows"].dump() +
              " rows from row " + part["first_row"].dump() + ", " + part["shards"].dump() +
              " shards\n";
    }
    text += "dedup: " + merge.value("dedup", std::string("off")) +
            ", shuffle: " + merge.value("shuffle", std::string("off")) +
            " (checks that compare rows ran within each part)\n";
  }
  if (json.contains("dropped")) {
    std::string reasons;
    std::uint64_t total = 0;
    for (const auto& [reason, count] : json["dropped"].items()) {
      total += count.get<std::uint64_t>();
      if (count.get<std::uint64_t>() > 0)
        reasons += (reasons.empty() ? "" : ", ") + std::to_string(count.get<std::uint64_t>()) +
                   " " + reason;
    }
    text += "\nvalidation: " + std::to_string(json.value("rows_checked", std::uint64_t{0})) +
            " rows checked, " + std::to_string(total) + " dropped" +
            (reasons.empty() ? "" : " (" + reasons + ")") + "\n";
  }
  if (json.contains("null_rows")) {
    // Per column, the rows that held a null in it (pack dropped them with the reason null).
    std::string columns;
    for (const auto& [column, count] : json["null_rows"].items())
      columns += (columns.empty() ? "" : ", ") + column + " " + count.dump();
    text += "  rows with a null, per column: " + columns + "\n";
  }
  if (json.contains("norm_stats")) {
    for (const auto& [column, stats] : json["norm_stats"].items()) {
      char line[160];
      std::snprintf(line, sizeof line, "  %s norms: min %.4g, mean %.4g, max %.4g\n",
                    column.c_str(), stats["min"].get<double>(), stats["mean"].get<double>(),
                    stats["max"].get<double>());
      text += line;
    }
  }
  return text;
}

}  // namespace

namespace {

// `shown` is the path the report names: the URL of a remote dataset read from its cache folder.
InspectReport inspect_local(const std::string& path, const std::string& shown) {
  std::error_code error;
  if (!fs::exists(path, error)) throw Error(path, "", "does not exist");
  Json json;
  json["path"] = shown;
  std::uint64_t logical = 0, padded = 0, on_disk = 0;
  if (fs::is_directory(path, error)) {
    // Lenient: what verify would call corrupt (a manifest whose hash does not match, a listed
    // shard missing or of another size, an unlisted shard file) is shown, with a warning.
    const auto opened = shard::open_dataset(path, shard::OpenMode::lenient);
    const auto& manifest = *opened.manifest;
    json["rows"] = manifest.rows;
    json["shards"] = Json::array();
    std::vector<std::uint64_t> text_bytes(manifest.columns.size(), 0);
    for (std::size_t s = 0; s < manifest.shards.size(); ++s) {
      const auto& listed = manifest.shards[s];
      json["shards"].push_back(
          {{"file", listed.file}, {"rows", listed.rows}, {"bytes", listed.bytes}});
      on_disk += listed.bytes;
      bool has_text = false;
      for (const auto& column : manifest.columns) has_text |= column.variable_length();
      if (!has_text || !opened.listed_intact[s]) continue;  // a damaged one is in the warning
      const auto layout = read_tables((fs::path(path) / listed.file).string());
      for (std::size_t c = 0; c < layout.columns.size() && c < text_bytes.size(); ++c)
        text_bytes[c] += layout.columns[c].aux_size;
    }
    json["columns"] = Json::array();
    for (std::size_t c = 0; c < manifest.columns.size(); ++c) {
      const auto& column = manifest.columns[c];
      json["columns"].push_back(column_json(column, manifest.rows));
      if (manifest.roles.size() == manifest.columns.size())
        json["columns"].back()["role"] = column_role_name(manifest.roles[c]);
      if (c < manifest.times.size() && manifest.times[c]) {  // dates and times (SPEC.md)
        const ColumnTime& time = *manifest.times[c];
        json["columns"].back()["time"] = {{"kind", std::string(time_kind_name(time.kind))},
                                          {"unit", std::string(time_unit_name(time.unit))},
                                          {"tz", time.tz.empty() ? Json(nullptr) : Json(time.tz)}};
      }
      if (column.variable_length()) {
        logical += text_bytes[c];
        padded += text_bytes[c] + (manifest.rows + manifest.shards.size()) * 8;
      } else {
        logical += manifest.rows * column.row_elements() * dtype_size(column.dtype);
        padded += manifest.rows * column.row_pitch_bytes();
      }
    }
    add_checks(json["columns"], manifest);
    Json inputs = Json::array();
    for (const auto& input : manifest.inputs)
      inputs.push_back(
          {{"path", input.path}, {"bytes", input.bytes}, {"xxh3", detail::hex64(input.xxh3)}});
    json["bytes"] = {{"logical", logical}, {"padded", padded}, {"on_disk", on_disk}};
    json["provenance"] = {
        {"tool_version", manifest.tool_version}, {"inputs", inputs}, {"options", manifest.options}};
    json["cpu_zero_copy"] = shards_join_on_pages(manifest);
    for (const auto& [key, value] : manifest.sections.items()) json[key] = value;
    if (!opened.problems.empty()) {
      std::string warning;
      for (const auto& problem : opened.problems)
        warning += (warning.empty() ? "" : "; ") + problem.file +
                   (problem.location.empty() ? "" : " (" + problem.location + ")") + ": " +
                   problem.cause;
      json["warning"] = warning + " (gpucache verify checks every byte)";
    }
  } else {
    const auto layout = read_tables(path);
    const auto rows = layout.header.row_count;
    json["rows"] = rows;
    on_disk = fs::file_size(path, error);
    json["shards"] = Json::array(
        {{{"file", fs::path(path).filename().string()}, {"rows", rows}, {"bytes", on_disk}}});
    json["columns"] = Json::array();
    for (const auto& column : layout.columns) {
      Json entry = column_json(column, rows);
      entry["offset"] = column.data_offset;
      if (column.kind == ColumnKind::text) {
        entry["text_offset"] = column.aux_offset;
        entry["text_bytes"] = column.aux_size;
        logical += column.aux_size;
        padded += column.aux_size + column.data_size;
      } else {
        logical += rows * column.row_elements() * dtype_size(column.dtype);
        padded += column.data_size;
      }
      json["columns"].push_back(entry);
    }
    json["bytes"] = {{"logical", logical}, {"padded", padded}, {"on_disk", on_disk}};
    json["shard"] = {{"index", layout.header.shard_index},
                     {"first_row", layout.header.first_row},
                     {"compressed", layout.header.compressed()},
                     {"header_hash", detail::hex64(layout.header.header_hash)}};
  }
  return {json.dump(2), render_text(json)};
}

}  // namespace

InspectReport inspect(const std::string& path) {
  if (remote::is_remote_path(path)) {  // the shards into the cache (GPUCACHE_CACHE), then as local
    const auto copy = remote::RemoteDataset::open(path, {});
    copy->fetch_all();
    return inspect_local(copy->local_dir(), copy->url());
  }
  return inspect_local(path, path);
}

}  // namespace gpucache
