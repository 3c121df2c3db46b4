#include "gpucache/validation_json.hpp"

#include <string_view>

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

Json encode(double value) {
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

}  // namespace

Json validation_options_to_json(const ValidationOptions& options) {
  Json json = Json::object();
  for (const auto& recorded : kRecordedRules)
    json[std::string(recorded.key)] = recorded.write(options);
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
  return options;
}

Json reason_counts_to_json(const ReasonCounts& counts) {
  Json json = Json::object();
  for (const auto& reason : drop_reasons())
    json[std::string(reason.name)] = counts[static_cast<std::size_t>(reason.reason)];
  return json;
}

}  // namespace gpucache
