#include "gpucache/shard/manifest.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "gpucache/common/hash.hpp"
#include "gpucache/error.hpp"

namespace gpucache::shard {
namespace {

using Json = nlohmann::ordered_json;

// `json` must not hold manifest_hash.
std::uint64_t hash_of(const Json& json) {
  const std::string compact = json.dump();
  return detail::xxh3_64(std::as_bytes(std::span(compact.data(), compact.size())));
}

std::uint64_t hash_field(const Json& value, const std::string& path, const std::string& key) {
  const auto hash =
      value.is_string() ? detail::parse_hex64(value.get<std::string>()) : std::nullopt;
  if (!hash) throw Error(path, key, "is not a 16-digit hex hash");
  return *hash;
}

// Every accessor below checks the JSON type first: nlohmann's own conversions throw their own
// exception types for a wrong type, and turn an out-of-range float into an integer with undefined
// behaviour, so untrusted manifests never reach them unchecked.
const Json& member(const Json& object, const char* key, const std::string& path,
                   const std::string& where) {
  if (!object.is_object()) throw Error(path, where, "is not a JSON object");
  const auto it = object.find(key);
  if (it == object.end()) throw Error(path, where, std::string("missing key '") + key + "'");
  return *it;
}

std::string join(const std::string& where, const char* key) {
  return where.empty() ? std::string(key) : where + "." + key;
}

std::uint64_t unsigned_value(const Json& value, const std::string& path, const std::string& where,
                             std::uint64_t max = UINT64_MAX) {
  if (!value.is_number_unsigned() || value.get<std::uint64_t>() > max)
    throw Error(
        path, where,
        "is not an integer from 0 to " + std::to_string(max) + " (it is " + value.dump() + ")");
  return value.get<std::uint64_t>();
}

std::uint64_t unsigned_field(const Json& object, const char* key, const std::string& path,
                             const std::string& where, std::uint64_t max = UINT64_MAX) {
  return unsigned_value(member(object, key, path, where), path, join(where, key), max);
}

std::string string_field(const Json& object, const char* key, const std::string& path,
                         const std::string& where) {
  const Json& value = member(object, key, path, where);
  if (!value.is_string()) throw Error(path, join(where, key), "is not a string");
  return value.get<std::string>();
}

const Json& array_field(const Json& object, const char* key, const std::string& path,
                        const std::string& where) {
  const Json& value = member(object, key, path, where);
  if (!value.is_array()) throw Error(path, join(where, key), "is not a JSON array");
  return value;
}

// A column entry's "time" ({"kind", "unit", "tz"}): only on an i64 tensor column of scalar rows.
ColumnTime parse_time(const Json& value, const Column& column, const std::string& path,
                      const std::string& where) {
  if (!value.is_object()) throw Error(path, where, "is not a JSON object");
  ColumnTime time;
  const auto kind = parse_time_kind(string_field(value, "kind", path, where));
  if (!kind) throw Error(path, where + ".kind", "is not 'timestamp', 'date', 'time' or 'duration'");
  time.kind = *kind;
  const auto unit = parse_time_unit(string_field(value, "unit", path, where));
  if (!unit) throw Error(path, where + ".unit", "is not 's', 'ms', 'us', 'ns' or 'D'");
  time.unit = *unit;
  if (const auto tz = value.find("tz"); tz != value.end() && !tz->is_null()) {
    if (!tz->is_string() || tz->get<std::string>().empty())
      throw Error(path, where + ".tz", "is not a time zone name or null");
    time.tz = tz->get<std::string>();
  }
  if (!time_is_valid(time))
    throw Error(path, where, describe_time(time) + " is not a valid time type");
  if (column.kind != ColumnKind::tensor || column.dtype != DType::i64)
    throw Error(path, where, "is set on a column that is not an i64 tensor");
  return time;
}

}  // namespace

std::string manifest_to_text(const Manifest& manifest) {
  Json json;
  json["format"] = kManifestFormat;
  json["format_version"] = kVersionMajor;
  json["tool"] = {{"name", "gpucache"}, {"version", manifest.tool_version}};
  json["rows"] = manifest.rows;
  json["columns"] = Json::array();
  const bool with_roles = manifest.roles.size() == manifest.columns.size();
  for (std::size_t c = 0; c < manifest.columns.size(); ++c) {
    const Column& column = manifest.columns[c];
    Json shape = Json::array({manifest.rows});
    for (std::uint64_t extent : column.row_shape) shape.push_back(extent);
    if (column.kind == ColumnKind::sequence) shape.push_back(nullptr);  // rows vary in length
    Json entry = {{"name", column.name}, {"kind", column_kind_name(column.kind)}};
    if (with_roles) entry["role"] = column_role_name(manifest.roles[c]);
    entry["dtype"] = dtype_name(column.dtype);
    entry["rank"] = column.rank();
    entry["shape"] = shape;
    entry["padded_dim"] = column.padded_dim;
    entry["row_pitch_bytes"] = column.row_pitch_bytes();
    if (c < manifest.times.size() && manifest.times[c]) {
      const ColumnTime& time = *manifest.times[c];
      entry["time"] = {{"kind", std::string(time_kind_name(time.kind))},
                       {"unit", std::string(time_unit_name(time.unit))},
                       {"tz", time.tz.empty() ? Json(nullptr) : Json(time.tz)}};
    }
    json["columns"].push_back(entry);
  }
  json["shards"] = Json::array();
  for (const auto& shard : manifest.shards)
    json["shards"].push_back({{"file", shard.file},
                              {"rows", shard.rows},
                              {"first_row", shard.first_row},
                              {"bytes", shard.bytes},
                              {"header_hash", detail::hex64(shard.header_hash)}});
  // Written only when there are segments, so a single pack's manifest is what it always was.
  if (!manifest.segments.empty()) {
    json["segments"] = Json::array();
    for (const auto& segment : manifest.segments)
      json["segments"].push_back({{"first_shard", segment.first_shard},
                                  {"shards", segment.shard_count},
                                  {"first_row", segment.first_row},
                                  {"rows", segment.rows},
                                  {"dataset_id", detail::hex64(segment.dataset_id)}});
  }
  json["inputs"] = Json::array();
  for (const auto& input : manifest.inputs)
    json["inputs"].push_back(
        {{"path", input.path}, {"bytes", input.bytes}, {"xxh3", detail::hex64(input.xxh3)}});
  json["options"] = manifest.options;
  for (const auto& [key, value] : manifest.sections.items()) json[key] = value;
  json["manifest_hash"] = detail::hex64(hash_of(json));
  return json.dump(2) + "\n";
}

Manifest parse_manifest(const std::string& text, const std::string& path, bool& hash_ok,
                        std::string* recorded_hash) {
  Json json;
  try {
    json = Json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    throw Error(path, "byte " + std::to_string(error.byte), "manifest is not valid JSON");
  } catch (const nlohmann::json::exception& error) {
    // out_of_range 406: a number too large for a double, e.g. 1e400.
    throw Error(path, "", std::string("manifest is not valid JSON: ") + error.what());
  }
  if (!json.is_object()) throw Error(path, "", "manifest is not a JSON object");
  const auto format = json.find("format");
  if (format == json.end() || !format->is_string() || *format != kManifestFormat)
    throw Error(path, "format", "not a gpucache dataset manifest");
  const auto version = unsigned_field(json, "format_version", path, "");
  if (version != kVersionMajor)
    throw Error(path, "format_version",
                "dataset format version " + std::to_string(version) + " is not supported");
  // Taken out rather than hashed from a copy: a manifest of 100,000 shards is 15 MB of JSON.
  std::optional<std::string> stored_hash;
  if (const auto it = json.find("manifest_hash"); it != json.end()) {
    if (it->is_string()) stored_hash = it->get<std::string>();
    json.erase(it);
  }
  hash_ok = stored_hash && *stored_hash == detail::hex64(hash_of(json));
  if (recorded_hash) *recorded_hash = stored_hash.value_or("");

  Manifest manifest;
  if (const auto tool = json.find("tool"); tool != json.end() && tool->is_object())
    if (const auto version_text = tool->find("version");
        version_text != tool->end() && version_text->is_string())
      manifest.tool_version = version_text->get<std::string>();
  manifest.rows = unsigned_field(json, "rows", path, "");
  const Json& columns = array_field(json, "columns", path, "");
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const std::string where = "columns[" + std::to_string(i) + "]";
    const Json& entry = columns[i];
    Column column;
    column.name = string_field(entry, "name", path, where);
    const auto kind = parse_column_kind(string_field(entry, "kind", path, where));
    if (!kind) throw Error(path, where + ".kind", "is not 'tensor', 'text' or 'sequence'");
    column.kind = *kind;
    if (const auto role = entry.find("role"); role != entry.end()) {
      const auto parsed =
          role->is_string() ? parse_column_role(role->get<std::string>()) : std::nullopt;
      if (!parsed)
        throw Error(path, where + ".role", "is not 'embedding', 'tensor', 'sequence' or 'text'");
      if (manifest.roles.size() != i)
        throw Error(path, where + ".role", "only some columns have a role");
      manifest.roles.push_back(*parsed);
    } else if (!manifest.roles.empty()) {
      throw Error(path, where, "only some columns have a role");
    }
    const auto dtype = parse_dtype(string_field(entry, "dtype", path, where));
    if (!dtype) throw Error(path, where + ".dtype", "unknown dtype");
    column.dtype = *dtype;
    const auto rank = unsigned_field(entry, "rank", path, where, 255);
    const Json& shape = array_field(entry, "shape", path, where);
    // The shape is [rows, *row_shape], its length the rank; a sequence's is [rows, null].
    const bool sequence = column.kind == ColumnKind::sequence;
    std::vector<std::uint64_t> extents;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (sequence && d == 1 && shape[d].is_null()) continue;
      extents.push_back(
          unsigned_value(shape[d], path, where + ".shape[" + std::to_string(d) + "]"));
    }
    const std::size_t dims = extents.size() + (sequence ? 1 : 0);
    if (rank == 0 || rank > kMaxRowDims + 1 || dims != rank || shape.size() != rank ||
        extents.empty() || extents[0] != manifest.rows || (sequence && extents.size() != 1))
      throw Error(path, where + ".shape", "does not match the rows and the rank");
    column.row_shape.assign(extents.begin() + 1, extents.end());
    column.padded_dim = unsigned_field(entry, "padded_dim", path, where);
    if (unsigned_field(entry, "row_pitch_bytes", path, where) != column.row_pitch_bytes())
      throw Error(path, where + ".row_pitch_bytes", "is not padded_dim × dtype size");
    if (const auto time = entry.find("time"); time != entry.end()) {
      manifest.times.resize(manifest.columns.size() + 1);
      manifest.times.back() = parse_time(*time, column, path, where + ".time");
    }
    manifest.columns.push_back(std::move(column));
  }
  if (!manifest.times.empty()) manifest.times.resize(manifest.columns.size());
  const Json& shards = array_field(json, "shards", path, "");
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string where = "shards[" + std::to_string(i) + "]";
    ManifestShard shard;
    shard.file = string_field(shards[i], "file", path, where);
    if (shard.file.empty() || shard.file.find('/') != std::string::npos || shard.file[0] == '.')
      throw Error(path, where + ".file",
                  "shard file name '" + shard.file + "' is not a plain name");
    shard.rows = unsigned_field(shards[i], "rows", path, where);
    shard.first_row = unsigned_field(shards[i], "first_row", path, where);
    shard.bytes = unsigned_field(shards[i], "bytes", path, where);
    shard.header_hash =
        hash_field(member(shards[i], "header_hash", path, where), path, where + ".header_hash");
    manifest.shards.push_back(std::move(shard));
  }
  if (json.contains("segments")) {
    const Json& segments = array_field(json, "segments", path, "");
    std::uint64_t next_shard = 0, next_row = 0;
    for (std::size_t i = 0; i < segments.size(); ++i) {
      const std::string where = "segments[" + std::to_string(i) + "]";
      ManifestSegment segment;
      segment.first_shard = unsigned_field(segments[i], "first_shard", path, where);
      segment.shard_count = static_cast<std::uint32_t>(
          unsigned_field(segments[i], "shards", path, where, UINT32_MAX));
      segment.first_row = unsigned_field(segments[i], "first_row", path, where);
      segment.rows = unsigned_field(segments[i], "rows", path, where);
      segment.dataset_id =
          hash_field(member(segments[i], "dataset_id", path, where), path, where + ".dataset_id");
      if (segment.first_shard != next_shard || segment.first_row != next_row ||
          segment.shard_count == 0)
        throw Error(path, where, "does not follow the previous segment");
      next_shard = segment.first_shard + segment.shard_count;
      next_row = segment.first_row + segment.rows;
      manifest.segments.push_back(segment);
    }
    if (next_shard != manifest.shards.size() || next_row != manifest.rows)
      throw Error(path, "segments", "do not cover the shards and rows exactly");
  }
  if (json.contains("inputs")) {
    const Json& inputs = array_field(json, "inputs", path, "");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::string where = "inputs[" + std::to_string(i) + "]";
      ManifestInput input;
      input.path = string_field(inputs[i], "path", path, where);
      input.bytes = unsigned_field(inputs[i], "bytes", path, where);
      input.xxh3 = hash_field(member(inputs[i], "xxh3", path, where), path, where + ".xxh3");
      manifest.inputs.push_back(std::move(input));
    }
  }
  if (json.contains("options")) manifest.options = json["options"];
  static const char* core_keys[] = {"format",        "format_version", "tool",   "rows",
                                    "columns",       "shards",         "inputs", "options",
                                    "manifest_hash", "segments"};
  for (const auto& [key, value] : json.items())
    if (std::find(std::begin(core_keys), std::end(core_keys), key) == std::end(core_keys))
      manifest.sections[key] = value;
  return manifest;
}

OpenedManifest open_manifest(const std::string& dir) {
  OpenedManifest opened;
  opened.path = (std::filesystem::path(dir) / kManifestName).string();
  std::ifstream stream(opened.path, std::ios::binary);
  if (!stream) throw Error(opened.path, "", "cannot open: not a finished gpucache dataset");
  std::ostringstream text;
  text << stream.rdbuf();
  opened.manifest = parse_manifest(text.str(), opened.path, opened.hash_ok, &opened.recorded_hash);
  return opened;
}

Manifest read_manifest(const std::string& path, bool& hash_ok) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw Error(path, "", "cannot open the manifest");
  std::ostringstream text;
  text << stream.rdbuf();
  return parse_manifest(text.str(), path, hash_ok);
}

}  // namespace gpucache::shard
