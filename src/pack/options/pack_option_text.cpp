// The text forms of pack's options, one parser each, for the CLI and the Python API alike.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gpucache/error.hpp"
#include "gpucache/pack.hpp"

namespace gpucache {

std::uint64_t parse_byte_size(std::string_view text, std::string_view option) {
  const std::string copy(text), name(option);
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(copy, &used);
  } catch (const std::exception&) {
    throw UsageError(name + " '" + copy + "' is not a size (examples: 4096, 512M, 1G)");
  }
  std::string unit = copy.substr(used);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("IB"))
    unit.erase(unit.size() - 2);
  else if (unit.size() > 1 && unit.ends_with("B"))
    unit.pop_back();
  double scale = 1;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "K")
    scale = 1024.0;
  else if (unit == "M")
    scale = 1024.0 * 1024;
  else if (unit == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    throw UsageError(name + " '" + copy + "' has an unknown unit (use K, M, G or T)");
  if (!(value > 0)) throw UsageError(name + " must be positive");
  // 2^64 bytes is 16 EiB: anything beyond (or not finite) cannot be converted to a count.
  if (!(value * scale < 18446744073709551616.0))
    throw UsageError(name + " '" + copy + "' is larger than 16 EiB");
  return static_cast<std::uint64_t>(value * scale);
}

std::uint64_t parse_max_output(std::string_view text) {
  if (text == "none") return UINT64_MAX;
  return parse_byte_size(text, "--max-output");
}

int parse_compression(std::string_view text) {
  if (text.empty() || text == "none") return 0;
  int level = 0;
  if (text == "zstd")
    level = 3;
  else if (text.starts_with("zstd:"))
    level = std::atoi(std::string(text.substr(5)).c_str());
  else
    throw UsageError("--compress must be zstd or zstd:LEVEL");
  if (level < 1 || level > 22) throw UsageError("zstd level must be 1 to 22");
  return level;
}

void apply_dtype_option(PackOptions& options, std::string_view text) {
  const auto equals = text.find('=');
  const auto dtype = parse_dtype(equals == std::string_view::npos ? text : text.substr(equals + 1));
  if (!dtype)
    throw UsageError("--dtype '" + std::string(text) + "': the type is not one of f32, f16, bf16");
  if (equals == std::string_view::npos)
    options.dtype = dtype;
  else
    options.column_dtypes.emplace_back(std::string(text.substr(0, equals)), *dtype);
}

Device parse_device_option(std::string_view text) {
  if (text == "auto") return Device::automatic;
  if (text == "cpu") return Device::cpu;
  if (text == "cuda") return Device::cuda;
  throw UsageError("--device must be auto, cpu or cuda");
}

OverflowPolicy parse_overflow_option(std::string_view text) {
  const auto policy = parse_overflow_policy(text);
  if (!policy) throw UsageError("--on-overflow must be drop, clamp or error");
  return *policy;
}

NullPolicy parse_null_option(std::string_view text) {
  if (text == "drop") return NullPolicy::drop;
  if (text == "error") return NullPolicy::error;
  throw UsageError("--on-null must be drop or error");
}

PartSpec parse_part_spec(std::string_view text) {
  const auto slash = text.find('/');
  auto number = [&](std::string_view digits) -> std::optional<std::uint32_t> {
    if (digits.empty() || digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    return static_cast<std::uint32_t>(std::stoul(std::string(digits)));
  };
  const auto index = slash == std::string_view::npos ? std::nullopt : number(text.substr(0, slash));
  const auto count =
      slash == std::string_view::npos ? std::nullopt : number(text.substr(slash + 1));
  if (!index || !count || *count == 0 || *index >= *count)
    throw UsageError("--part '" + std::string(text) +
                     "': expected K/N with 0 <= K < N, e.g. 0/4 (K is the array task index)");
  return {*index, *count};
}

std::vector<SplitSpec> parse_split_spec(std::string_view text) {
  std::vector<SplitSpec> splits;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    const std::string_view item = text.substr(begin, comma - begin);
    const std::size_t equals = item.find('=');
    if (equals == std::string_view::npos || equals == 0)
      throw UsageError("--split '" + std::string(text) + "': expected NAME=FRACTION,NAME=FRACTION");
    SplitSpec split{std::string(item.substr(0, equals)), 0};
    const std::string fraction(item.substr(equals + 1));
    char* end = nullptr;
    split.fraction = std::strtod(fraction.c_str(), &end);
    if (fraction.empty() || end != fraction.c_str() + fraction.size())
      throw UsageError("--split " + split.name + ": '" + fraction + "' is not a number");
    const bool plain = std::all_of(split.name.begin(), split.name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
    if (!plain || split.name.size() > 64)
      throw UsageError("--split: the name '" + split.name +
                       "' must be letters, digits, '_' and '-' (it names a folder)");
    splits.push_back(std::move(split));
    begin = comma + 1;
  }
  return splits;
}

namespace {

// One entry's {"COLUMN": "TEXT"} object as the COLUMN=TEXT forms --field and --role take.
std::vector<std::pair<std::string, std::string>> column_pairs(const nlohmann::json& object,
                                                              const std::string& where) {
  if (!object.is_object()) throw UsageError(where + " must be an object {\"COLUMN\": \"...\"}");
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& [column, value] : object.items()) {
    if (!value.is_string()) throw UsageError(where + "[\"" + column + "\"] must be a string");
    pairs.emplace_back(column, value.get<std::string>());
  }
  return pairs;
}

}  // namespace

void apply_input_map(PackOptions& options, std::string_view map) {
  namespace fs = std::filesystem;
  const std::string text(map);
  const bool inline_json = !text.empty() && (text.front() == '{' || text.front() == '[');
  std::string source = "--input-map";
  fs::path folder;
  nlohmann::json parsed;
  try {
    if (inline_json) {
      parsed = nlohmann::json::parse(text);
    } else {
      source = text;
      std::ifstream file(text);
      if (!file)
        throw UsageError("--input-map " + text +
                         ": cannot read the file (a JSON map of the inputs, docs/cli.md)");
      folder = fs::path(text).parent_path();
      std::stringstream contents;
      contents << file.rdbuf();
      parsed = nlohmann::json::parse(contents.str());
    }
  } catch (const nlohmann::json::exception& error) {
    throw UsageError(source + ": not valid JSON (" + error.what() + ")");
  }
  const nlohmann::json* entries = &parsed;
  if (parsed.is_object()) {
    if (!parsed.contains("inputs") || parsed.size() != 1)
      throw UsageError(source + ": the map is {\"inputs\": [ENTRY, ...]} (or the list alone)");
    entries = &parsed["inputs"];
  }
  if (!entries->is_array() || entries->empty())
    throw UsageError(source + ": \"inputs\" must be a non-empty list of entries " +
                     "{\"path\": FILE, \"kind\": ..., \"fields\": {...}, \"roles\": {...}}");
  for (std::size_t i = 0; i < entries->size(); ++i) {
    const auto& entry = (*entries)[i];
    const std::string where = source + ": input " + std::to_string(i);
    if (!entry.is_object() || !entry.contains("path") || !entry["path"].is_string())
      throw UsageError(where + " needs \"path\": the input file");
    for (const auto& [key, value] : entry.items())
      if (key != "path" && key != "kind" && key != "fields" && key != "roles" && key != "fill")
        throw UsageError(where + " has \"" + key +
                         "\"; an entry takes path, kind, fields, roles and fill");
    fs::path path = entry["path"].get<std::string>();
    if (path.is_relative() && !folder.empty()) path = folder / path;
    InputMapping mapping;
    if (entry.contains("kind")) {
      const auto& kind = entry["kind"];
      mapping.kind = kind.is_string() ? parse_source_kind(kind.get<std::string>()) : std::nullopt;
      if (!mapping.kind)
        throw UsageError(where + " (" + path.string() +
                         "): \"kind\" must be dialogue, embeddings, llm-cache or tensors");
    }
    if (entry.contains("fields")) {
      for (const auto& [column, field_path] :
           column_pairs(entry["fields"], where + " (" + path.string() + "): \"fields\""))
        mapping.fields.push_back({column, field_path, ""});
    }
    if (entry.contains("roles")) {
      for (const auto& [column, role] :
           column_pairs(entry["roles"], where + " (" + path.string() + "): \"roles\""))
        mapping.roles.push_back(parse_role_spec(column + "=" + role));
    }
    if (entry.contains("fill"))
      mapping.fill_texts =
          column_pairs(entry["fill"], where + " (" + path.string() + "): \"fill\"");
    if (!mapping.kind && !mapping.fields.empty()) {
      auto names = [&](std::string_view column) {
        return std::any_of(mapping.fields.begin(), mapping.fields.end(),
                           [&](const FieldSpec& field) { return field.column == column; });
      };
      mapping.kind = names("question_embedding") || names("answer_embedding") ? SourceKind::dialogue
                     : names("embedding") ? SourceKind::embeddings
                                          : SourceKind::tensors;
    }
    options.inputs.push_back(path.string());
    options.input_mappings.push_back(std::move(mapping));
  }
}

}  // namespace gpucache
