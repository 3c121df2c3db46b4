#include "gpucache/validation_json.hpp"

#include <cmath>
#include <string_view>
#include <utility>

#include "gpucache/error.hpp"

namespace gpucache {
namespace {

using Json = nlohmann::ordered_json;

// Where a value came from, for errors.
struct Where {
  const std::string& file;
  std::string_view key;

  [[noreturn]] void fail(const Json& value, std::string_view expected) const {
    throw Error(file, "options.validation." + std::string(key),
                "expected " + std::string(expected) + ", got " + value.dump());
  }
};

// JSON has no infinity: an open bound (norm_max inf) is written as the string "inf".
Json encode(double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}
Json encode(bool value) {
  return value;
}
Json encode(std::uint64_t value) {
  return value;
}
Json encode(OverflowPolicy policy) {
  return overflow_policy_name(policy);
}
template <typename T>
Json encode(const std::optional<T>& value) {
  return value ? encode(*value) : Json(nullptr);
}

void decode(const Json& value, double& out, const Where& where) {
  if (value == "inf" || value == "-inf") {
    out = value == "inf" ? INFINITY : -INFINITY;
    return;
  }
  if (!value.is_number()) where.fail(value, "a number");
  out = value.get<double>();
}
void decode(const Json& value, bool& out, const Where& where) {
  if (!value.is_boolean()) where.fail(value, "true or false");
  out = value.get<bool>();
}
void decode(const Json& value, std::uint64_t& out, const Where& where) {
  if (!value.is_number_unsigned()) where.fail(value, "a non-negative integer");
  out = value.get<std::uint64_t>();
}
void decode(const Json& value, OverflowPolicy& out, const Where& where) {
  const auto policy = value.is_string() ? parse_overflow_policy(value.get<std::string>())
                                        : std::optional<OverflowPolicy>();
  if (!policy) where.fail(value, "\"drop\", \"clamp\" or \"error\"");
  out = *policy;
}
template <typename T>
void decode(const Json& value, std::optional<T>& out, const Where& where) {
  if (value.is_null()) {
    out.reset();
    return;
  }
  T decoded{};
  decode(value, decoded, where);
  out = decoded;
}

// One recorded rule: its key and how its member goes to and from JSON.
struct RecordedRule {
  std::string_view key;
  Json (*write)(const ValidationOptions& options);
  void (*read)(const Json& value, ValidationOptions& options, const Where& where);
};

template <auto Member>
constexpr RecordedRule rule(std::string_view key) {
  return {key, [](const ValidationOptions& options) { return encode(options.*Member); },
          [](const Json& value, ValidationOptions& options, const Where& where) {
            decode(value, options.*Member, where);
          }};
}

// The rules in manifest.json, in the order they are written. Append new rules at the end, and
// never rename a key: existing datasets carry them.
constexpr RecordedRule kRecordedRules[] = {
    rule<&ValidationOptions::norm_min>("norm_min"),
    rule<&ValidationOptions::norm_max>("norm_max"),
    rule<&ValidationOptions::dedup>("dedup"),
    rule<&ValidationOptions::pair_cos_min>("pair_cos_min"),
    rule<&ValidationOptions::pair_cos_max>("pair_cos_max"),
    rule<&ValidationOptions::on_overflow>("on_overflow"),
    rule<&ValidationOptions::normalize>("normalize"),
    rule<&ValidationOptions::max_rows_per_source>("max_rows_per_source"),
    rule<&ValidationOptions::sample_fraction>("sample"),
    rule<&ValidationOptions::shuffle>("shuffle"),
    rule<&ValidationOptions::seed>("seed"),
};

// The per-column checks: {"images": {"checks": ["finite"]}, "embedding": {"checks": ["finite",
// "nonzero", "norm"], "norm_min": 0.1, "norm_max": 100.0, "normalized": true}}. Bounds are written
// with the norm check only, normalized only when true.
constexpr std::string_view kColumnsKey = "columns";

Json columns_to_json(const std::vector<ColumnChecks>& columns) {
  Json json = Json::object();
  for (const auto& column : columns) {
    Json entry = Json::object();
    Json checks = Json::array();
    for (const auto& info : kChecks)
      if (column.checks.has(info.check)) checks.push_back(std::string(info.name));
    entry["checks"] = checks;
    if (column.checks.has(Check::norm)) {
      entry["norm_min"] = encode(column.norm_min);
      entry["norm_max"] = encode(column.norm_max);
    }
    if (column.normalized) entry["normalized"] = true;
    json[column.column] = entry;
  }
  return json;
}

std::vector<ColumnChecks> columns_from_json(const Json& json, const ValidationOptions& options,
                                            const std::string& file) {
  const std::string key(kColumnsKey);
  if (!json.is_object()) Where{file, key}.fail(json, "an object of columns");
  std::vector<ColumnChecks> columns;
  for (const auto& [name, entry] : json.items()) {
    const std::string entry_key = key + "." + name;
    if (!entry.is_object()) Where{file, entry_key}.fail(entry, "an object");
    ColumnChecks column;
    column.column = name;
    column.norm_min = options.norm_min;
    column.norm_max = options.norm_max;
    const std::string checks_key = entry_key + ".checks";
    const auto checks = entry.find("checks");
    if (checks == entry.end() || !checks->is_array())
      Where{file, checks_key}.fail(checks == entry.end() ? Json(nullptr) : *checks,
                                   "a list of checks");
    for (const auto& check : *checks) {
      const auto parsed =
          check.is_string() ? parse_check(check.get<std::string>()) : std::optional<Check>();
      if (!parsed) Where{file, checks_key}.fail(check, "one of the checks of kChecks");
      column.checks.add(*parsed);
    }
    for (const auto& [bound, member] : {std::pair{"norm_min", &ColumnChecks::norm_min},
                                        std::pair{"norm_max", &ColumnChecks::norm_max}})
      if (const auto found = entry.find(bound); found != entry.end()) {
        const std::string bound_key = entry_key + "." + bound;
        decode(*found, column.*member, Where{file, bound_key});
      }
    if (const auto found = entry.find("normalized"); found != entry.end()) {
      const std::string normalized_key = entry_key + ".normalized";
      decode(*found, column.normalized, Where{file, normalized_key});
    }
    columns.push_back(std::move(column));
  }
  return columns;
}

}  // namespace

Json validation_options_to_json(const ValidationOptions& options) {
  Json json = Json::object();
  for (const auto& recorded : kRecordedRules)
    json[std::string(recorded.key)] = recorded.write(options);
  if (options.columns) json[std::string(kColumnsKey)] = columns_to_json(*options.columns);
  return json;
}

ValidationOptions validation_options_from_json(const Json& json, const std::string& file) {
  if (!json.is_object())
    throw Error(file, "options.validation", "expected an object, got " + json.dump());
  ValidationOptions options;
  for (const auto& recorded : kRecordedRules) {
    const auto found = json.find(std::string(recorded.key));
    if (found != json.end()) recorded.read(*found, options, Where{file, recorded.key});
  }
  if (const auto found = json.find(std::string(kColumnsKey)); found != json.end())
    options.columns = columns_from_json(*found, options, file);
  return options;
}

Json reason_counts_to_json(const ReasonCounts& counts) {
  Json json = Json::object();
  for (const auto& reason : drop_reasons())
    json[std::string(reason.name)] = counts[static_cast<std::size_t>(reason.reason)];
  return json;
}

}  // namespace gpucache
