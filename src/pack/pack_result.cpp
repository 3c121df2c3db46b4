// What a pack run reports: PackResult as the --json object and as the text the CLI prints.
#include <nlohmann/json.hpp>

#include "gpucache/column_name.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/validation_json.hpp"
#include "pack_source.hpp"

namespace gpucache {
namespace {
using Json = nlohmann::ordered_json;
}  // namespace

std::string PackResult::to_json() const {
  Json json;
  json["ok"] = true;
  json["output"] = output_dir;
  json["input_rows"] = input_rows;
  json["rows"] = rows;
  json["bytes"] = bytes;
  json["device"] = {{"name", device.empty() ? Json(nullptr) : Json(device)},
                    {"reason", device_reason}};
  json["dropped"] = reason_counts_to_json(dropped);
  json["sampled_out"] = sampled_out;
  json["conversion"] = {{"overflowed_values", overflowed_values},
                        {"flushed_to_zero_values", flushed_to_zero_values}};
  json["resumed_shards"] = resumed_shards;
  json["left_out"] = detail::left_out_json(left_out);
  json["renamed"] = detail::renamed_json(renamed);
  json["stored_as"] = Json::array();
  for (const auto& conversion : conversions)
    json["stored_as"].push_back({{"column", conversion.column},
                                 {"from", std::string(dtype_name(conversion.from))},
                                 {"to", std::string(dtype_name(conversion.to))},
                                 {"asked", conversion.asked},
                                 {"exact", conversion.exact}});
  json["times"] = Json::array();
  for (const auto& [column, time] : times)
    json["times"].push_back({{"column", column},
                             {"kind", std::string(time_kind_name(time.kind))},
                             {"unit", std::string(time_unit_name(time.unit))},
                             {"tz", time.tz.empty() ? Json(nullptr) : Json(time.tz)}});
  json["input_conversions"] = detail::input_conversions_json(input_conversions);
  json["not_selected"] = Json::array();
  for (const auto& [input, field] : not_selected)
    json["not_selected"].push_back({{"input", input}, {"field", field}});
  auto shard_list = [](const std::vector<PackedShard>& list) {
    Json out = Json::array();
    for (const auto& shard : list)
      out.push_back({{"file", shard.file}, {"rows", shard.rows}, {"bytes", shard.bytes}});
    return out;
  };
  if (splits.empty()) {
    json["shards"] = shard_list(shards);
  } else {
    json["splits"] = Json::array();
    if (!split_by.empty()) json["split_by"] = split_by;
    for (const auto& split : splits) {
      Json entry = {{"name", split.name}, {"output", split.output_dir}};
      if (split_by.empty())
        entry["fraction"] = split.fraction;
      else
        entry["value"] = split_by_integer ? Json::parse(split.value) : Json(split.value);
      entry["rows"] = split.rows;
      entry["bytes"] = split.bytes;
      entry["shards"] = shard_list(split.shards);
      json["splits"].push_back(std::move(entry));
    }
  }
  return json.dump(2);
}

std::string PackResult::to_text() const {
  std::uint64_t dropped_total = 0;
  std::string reasons;
  for (const auto& reason : drop_reasons()) {
    const std::uint64_t count = dropped[static_cast<std::size_t>(reason.reason)];
    dropped_total += count;
    if (count)
      reasons +=
          (reasons.empty() ? "" : ", ") + std::to_string(count) + " " + std::string(reason.name);
  }
  auto shard_count = [](std::size_t count) {
    return std::to_string(count) + " shard" + (count == 1 ? "" : "s");
  };
  std::string text =
      "packed " + std::to_string(rows) + " of " + std::to_string(input_rows) + " rows into ";
  if (splits.empty()) {
    text += shard_count(shards.size()) + " (" + std::to_string(bytes) + " bytes) in " + output_dir;
  } else {
    text += std::to_string(splits.size()) + " splits" +
            (split_by.empty() ? "" : " by " + split_by) + " (" + std::to_string(bytes) + " bytes):";
    for (const auto& split : splits)
      text += "\n  " + split.name + ": " + std::to_string(split.rows) + " rows in " +
              shard_count(split.shards.size()) + " in " + split.output_dir;
  }
  for (const auto& [column, time] : times)
    text += "\ncolumn '" + column + "': " + describe_time(time) + ", stored as i64";
  if (dropped_total) text += "\ndropped " + std::to_string(dropped_total) + " rows: " + reasons;
  if (sampled_out) text += "\nsampled out " + std::to_string(sampled_out) + " rows";
  if (!device.empty()) text += "\nvalidated on " + device + " (" + device_reason + ")";
  if (resumed_shards)
    text +=
        "\nresumed: " + std::to_string(resumed_shards) + " shards kept from the interrupted run";
  return text;
}

std::string PackResult::notes_text() const {
  std::string text;
  for (const auto& conversion : conversions)
    if (!conversion.asked)
      text += "stored as " + std::string(dtype_name(conversion.to)) + ": column '" +
              conversion.column + "' holds " + std::string(dtype_name(conversion.from)) +
              " values in an input, stored " + (conversion.exact ? "exactly " : "rounded ") +
              "in the first input's type (pass --dtype " + conversion.column + "=" +
              std::string(dtype_name(conversion.to)) + " to ask for it)\n";
  // --split-by: a value whose directory name differs from it (characters replaced, cut).
  for (const auto& split : splits)
    if (!split_by.empty() && split.name != split.value)
      text += "split by " + split_by + ": the value '" + split.value + "' is written to " +
              split.output_dir + " (a directory name keeps letters, digits, '-', '_' and '.')\n";
  for (const auto& entry : input_conversions)
    text += "converted: " + entry.input + ": " + entry.field + " (" + entry.conversion + ")\n";
  for (const auto& entry : left_out)
    text += "left out: " + entry.input + ": " + entry.field + " (" + entry.reason +
            "); --strict makes this an error\n";
  for (const auto& entry : renamed)
    text += "renamed: " + entry.input + ": " + entry.field + " is the column '" + entry.column +
            "' (a column name is " + std::string(kColumnNameRule) +
            "; --field NAME=" + entry.field + " names it)\n";
  if (!not_selected.empty()) {
    text += "note: --field keeps only the columns it names; not packed:";
    for (std::size_t i = 0; i < not_selected.size(); ++i)
      text += (i ? ", " : " ") + not_selected[i].first + ": " + not_selected[i].second;
    text += "\n";
  }
  return text;
}

}  // namespace gpucache
