#include "formats/shard/manifest.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "gpucache/error.hpp"

namespace gpucache::shard {
namespace {

using Json = nlohmann::ordered_json;

std::uint64_t hash_without_self(Json json) {
  json.erase("manifest_hash");
  const std::string compact = json.dump();
  return xxh3_64(std::as_bytes(std::span(compact.data(), compact.size())));
}

std::uint64_t parse_hex64(const Json& value, const std::string& path, const std::string& key) {
  if (!value.is_string() || value.get<std::string>().size() != 16)
    throw Error(path, key, "is not a 16-digit hex hash");
  std::uint64_t result = 0;
  for (char c : value.get<std::string>()) {
    int digit;
    if (c >= '0' && c <= '9')
      digit = c - '0';
    else if (c >= 'a' && c <= 'f')
      digit = c - 'a' + 10;
    else
      throw Error(path, key, "is not a 16-digit hex hash");
    result = result << 4 | static_cast<std::uint64_t>(digit);
  }
  return result;
}

template <typename T>
T field(const Json& object, const char* key, const std::string& path, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) throw Error(path, where, std::string("missing key '") + key + "'");
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(path, where + "." + key, "has the wrong type");
  }
}

}  // namespace

std::string hex64(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string shard_file_name(std::uint32_t index) {
  char text[32];
  std::snprintf(text, sizeof text, "shard-%05u.gcs", index);
  return text;
}

std::string_view column_kind_name(ColumnKind kind) noexcept {
  return kind == ColumnKind::text ? "text" : "tensor";
}

std::string manifest_to_text(const Manifest& manifest) {
  Json json;
  json["format"] = kManifestFormat;
  json["format_version"] = kVersionMajor;
  json["tool"] = {{"name", "gpucache"}, {"version", manifest.tool_version}};
  json["rows"] = manifest.rows;
  json["columns"] = Json::array();
  for (const auto& column : manifest.columns) {
    Json shape = Json::array({manifest.rows});
    if (column.rank == 2) shape.push_back(column.dim);
    json["columns"].push_back({{"name", column.name},
                               {"kind", column_kind_name(column.kind)},
                               {"dtype", dtype_name(column.dtype)},
                               {"rank", column.rank},
                               {"shape", shape},
                               {"padded_dim", column.padded_dim},
                               {"row_pitch_bytes", column.row_pitch_bytes}});
  }
  json["shards"] = Json::array();
  for (const auto& shard : manifest.shards)
    json["shards"].push_back({{"file", shard.file},
                              {"rows", shard.rows},
                              {"first_row", shard.first_row},
                              {"bytes", shard.bytes},
                              {"header_hash", hex64(shard.header_hash)}});
  json["inputs"] = Json::array();
  for (const auto& input : manifest.inputs)
    json["inputs"].push_back(
        {{"path", input.path}, {"bytes", input.bytes}, {"xxh3", hex64(input.xxh3)}});
  json["options"] = manifest.options;
  for (const auto& [key, value] : manifest.sections.items()) json[key] = value;
  json["manifest_hash"] = hex64(hash_without_self(json));
  return json.dump(2) + "\n";
}

Manifest parse_manifest(const std::string& text, const std::string& path, bool& hash_ok) {
  Json json;
  try {
    json = Json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    throw Error(path, "byte " + std::to_string(error.byte), "manifest is not valid JSON");
  }
  if (!json.is_object()) throw Error(path, "", "manifest is not a JSON object");
  if (json.value("format", "") != kManifestFormat)
    throw Error(path, "format", "not a gpucache dataset manifest");
  const auto version = field<std::uint64_t>(json, "format_version", path, "manifest");
  if (version != kVersionMajor)
    throw Error(path, "format_version",
                "dataset format version " + std::to_string(version) + " is not supported");
  const auto stored_hash = json.find("manifest_hash");
  hash_ok = stored_hash != json.end() && stored_hash->is_string() &&
            stored_hash->get<std::string>() == hex64(hash_without_self(json));

  Manifest manifest;
  manifest.tool_version = json.contains("tool") ? json["tool"].value("version", "") : "";
  manifest.rows = field<std::uint64_t>(json, "rows", path, "manifest");
  const auto& columns = json.at("columns");
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const std::string where = "columns[" + std::to_string(i) + "]";
    ManifestColumn column;
    column.name = field<std::string>(columns[i], "name", path, where);
    column.kind = field<std::string>(columns[i], "kind", path, where) == "text"
                      ? ColumnKind::text
                      : ColumnKind::tensor;
    const auto dtype = parse_dtype(field<std::string>(columns[i], "dtype", path, where));
    if (!dtype) throw Error(path, where + ".dtype", "unknown dtype");
    column.dtype = *dtype;
    column.rank = field<std::uint8_t>(columns[i], "rank", path, where);
    const auto shape = field<std::vector<std::uint64_t>>(columns[i], "shape", path, where);
    column.dim = shape.size() == 2 ? shape[1] : 1;
    column.padded_dim = field<std::uint64_t>(columns[i], "padded_dim", path, where);
    column.row_pitch_bytes = field<std::uint64_t>(columns[i], "row_pitch_bytes", path, where);
    manifest.columns.push_back(std::move(column));
  }
  const auto& shards = json.at("shards");
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string where = "shards[" + std::to_string(i) + "]";
    ManifestShard shard;
    shard.file = field<std::string>(shards[i], "file", path, where);
    if (shard.file.empty() || shard.file.find('/') != std::string::npos || shard.file[0] == '.')
      throw Error(path, where + ".file",
                  "shard file name '" + shard.file + "' is not a plain name");
    shard.rows = field<std::uint64_t>(shards[i], "rows", path, where);
    shard.first_row = field<std::uint64_t>(shards[i], "first_row", path, where);
    shard.bytes = field<std::uint64_t>(shards[i], "bytes", path, where);
    shard.header_hash = parse_hex64(shards[i].at("header_hash"), path, where + ".header_hash");
    manifest.shards.push_back(std::move(shard));
  }
  if (json.contains("inputs"))
    for (const auto& input : json["inputs"])
      manifest.inputs.push_back(
          {input.value("path", ""), input.value("bytes", std::uint64_t{0}),
           input.contains("xxh3") ? parse_hex64(input["xxh3"], path, "inputs.xxh3") : 0});
  if (json.contains("options")) manifest.options = json["options"];
  static const char* core_keys[] = {"format", "format_version", "tool",
                                    "rows",   "columns",        "shards",
                                    "inputs", "options",        "manifest_hash"};
  for (const auto& [key, value] : json.items())
    if (std::find(std::begin(core_keys), std::end(core_keys), key) == std::end(core_keys))
      manifest.sections[key] = value;
  return manifest;
}

Manifest read_manifest(const std::string& path, bool& hash_ok) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw Error(path, "", "cannot open the manifest");
  std::ostringstream text;
  text << stream.rdbuf();
  return parse_manifest(text.str(), path, hash_ok);
}

}  // namespace gpucache::shard
