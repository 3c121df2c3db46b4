// The pack option table (gpucache/pack_options.hpp): every option reaches the CLI (flag, help and
// default in `gpucache pack --help`), the Python keywords (the extension applies them through the
// table; src/python/tests/test_pack_options.py checks the Python side) and docs/cli.md's table,
// with one default, the one PackOptions' initialisers hold.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gpucache/error.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/pack_options.hpp"
#include "pack_append.hpp"
#include "test_support.hpp"

using namespace gpucache;
using test_support::run_cli;

namespace {

// Every member of PackOptions an option sets, as text: two options structs are the same to pack
// when their fingerprints are.
std::string fingerprint(const PackOptions& o) {
  std::ostringstream out;
  out << "kind=" << (o.kind ? static_cast<int>(*o.kind) : -1) << " fields=" << o.fields.size()
      << " roles=" << o.roles.size() << " inputs=" << o.inputs.size()
      << " input_mappings=" << o.input_mappings.size()
      << " dtype=" << (o.dtype ? dtype_name(*o.dtype) : "-")
      << " column_dtypes=" << o.column_dtypes.size() << " splits=" << o.splits.size()
      << " split_by=" << o.split_by << " part="
      << (o.part ? std::to_string(o.part->index) + "/" + std::to_string(o.part->count) : "-")
      << " append=" << o.append_to << " shard_size=" << o.shard_size
      << " shard_rows=" << (o.shard_rows ? std::to_string(*o.shard_rows) : "-")
      << " max_output=" << o.max_output << " pad_to=" << o.pad_to << " zstd=" << o.zstd_level
      << " threads=" << o.threads << " force=" << o.force << " resume=" << o.resume
      << " fsync=" << o.fsync << " checks=" << o.checks.size() << " no_checks=" << o.no_checks
      << " rejects=" << o.rejects_path;
  const auto& v = o.validation;
  out << " device=" << static_cast<int>(v.device) << " norm=" << v.norm_min << ":" << v.norm_max
      << " dedup=" << v.dedup << " pair_cos=" << (v.pair_cos_min ? *v.pair_cos_min : -9) << ":"
      << (v.pair_cos_max ? *v.pair_cos_max : -9)
      << " on_overflow=" << static_cast<int>(v.on_overflow) << " normalize=" << v.normalize
      << " max_rows=" << (v.max_rows_per_source ? std::to_string(*v.max_rows_per_source) : "-")
      << " sample=" << (v.sample_fraction ? *v.sample_fraction : -1) << " shuffle=" << v.shuffle
      << " seed=" << v.seed << " strict=" << o.strict << " on_null=" << static_cast<int>(o.on_null);
  return out.str();
}

// The value at a dotted key ("validation.seed") of the recorded options; null when absent.
nlohmann::ordered_json at_key(const nlohmann::ordered_json& json, std::string_view key) {
  const nlohmann::ordered_json* node = &json;
  while (!key.empty()) {
    const auto dot = key.find('.');
    const std::string part(key.substr(0, dot));
    if (!node->is_object() || !node->contains(part)) return nullptr;
    node = &(*node)[part];
    key = dot == std::string_view::npos ? std::string_view() : key.substr(dot + 1);
  }
  return *node;
}

std::string read_text(const std::string& path) {
  std::ifstream stream(path);
  std::ostringstream text;
  text << stream.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("each option's default text means PackOptions' initialisers") {
  const std::string defaults = fingerprint(PackOptions{});
  for (const auto& info : pack_option_table()) {
    if (info.default_text.empty()) continue;
    CAPTURE(info.flag);
    PackOptions options;
    info.apply(options, info.default_text, info.flag);
    CHECK(fingerprint(options) == defaults);
  }
}

TEST_CASE(
    "each option takes effect; the recorded ones change the manifest's options at their key") {
  const std::string defaults = fingerprint(PackOptions{});
  const auto default_json = detail::pack_options_json(PackOptions{});
  std::set<std::string_view> flags, keywords;
  for (const auto& info : pack_option_table()) {
    CAPTURE(info.flag);
    CHECK(flags.insert(info.flag).second);
    CHECK(keywords.insert(info.python).second);
    CHECK(info.flag.starts_with("--"));
    CHECK(!info.help.empty());
    CHECK((info.type == PackOptionType::flag) == info.value_name.empty());
    PackOptions options;
    info.apply(options, info.example, info.flag);
    CHECK(fingerprint(options) != defaults);
    const auto json = detail::pack_options_json(options);
    // The per-column checks are recorded once the inputs' columns are known (plan_validation),
    // so they cannot be seen here; tests/test_pack_resume.cpp covers them.
    if (info.json_key.starts_with("validation.columns")) continue;
    if (info.json_key.empty()) {
      CHECK(json == default_json);
      CHECK(!info.compared);
    } else {
      CHECK(at_key(json, info.json_key) != at_key(default_json, info.json_key));
    }
  }
}

TEST_CASE("a bad value is a usage error naming the option as the caller spelled it") {
  for (const auto& info : pack_option_table()) {
    if (info.type == PackOptionType::text || info.type == PackOptionType::texts) continue;
    CAPTURE(info.flag);
    PackOptions options;
    std::string message;
    try {
      info.apply(options, "x1", info.python);
    } catch (const UsageError& error) {
      message = error.what();
    }
    CHECK(message.find(std::string(info.python)) != std::string::npos);
  }
}

TEST_CASE("gpucache pack --help lists every option with its default; probe the mapping ones") {
  const auto help = run_cli({"pack", "--help"});
  REQUIRE(help.exit_code == 0);
  for (const auto& info : pack_option_table()) {
    CAPTURE(info.flag);
    // The option's own line: "  --seed N=0   Seed for ...".
    const auto at = help.out.find("\n  " + std::string(info.flag) + " ");
    REQUIRE(at != std::string::npos);
    const std::string line = help.out.substr(at + 1, help.out.find("\n", at + 1) - at - 1);
    if (!info.default_text.empty())
      CHECK(line.find("=" + std::string(info.default_text)) != std::string::npos);
  }
  const auto probe = run_cli({"probe", "--help"});
  for (const std::string flag : {"--kind", "--field", "--role"})
    CHECK(probe.out.find(flag + " ") != std::string::npos);
}

TEST_CASE("the CLI applies its options through the table") {
  test_support::ScratchDir scratch;
  const auto out = scratch / "ds";
  const auto result =
      run_cli({"pack", test_support::data_path("npy/f32_c.npy"), "-o", out, "--quiet", "--seed",
               "5", "--pad-to", "32", "--no-fsync", "--shard-size", "4K", "--dtype", "f16"});
  REQUIRE(result.exit_code == 0);
  const auto manifest = nlohmann::json::parse(read_text(out + "/manifest.json"));
  CHECK(manifest["options"]["validation"]["seed"] == 5);
  CHECK(manifest["options"]["pad_to"] == 32);
  CHECK(manifest["options"]["shard_size"] == 4096);
  CHECK(manifest["options"]["dtype"] == "f16");
  // An option of one value given twice is refused, as before the table.
  CHECK(run_cli({"pack", "x.npy", "-o", out, "--seed", "1", "--seed", "2"}).exit_code == 2);
  const auto bad = run_cli({"pack", "x.npy", "-o", out, "--seed", "many"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--seed 'many' is not a whole number") != std::string::npos);
}

TEST_CASE("docs/cli.md holds the table's option list") {
  const std::string path = std::string(GPUCACHE_TEST_DATA) + "/../../docs/cli.md";
  const std::string docs = read_text(path);
  const std::string begin = "<!-- pack options: made from pack_options_markdown() -->\n";
  const std::string end = "<!-- end of pack options -->";
  const auto from = docs.find(begin);
  const auto to = docs.find(end);
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  const std::string table = pack_options_markdown();
  const std::string written = docs.substr(from + begin.size(), to - from - begin.size());
  // GPUCACHE_UPDATE_DOCS=1 writes the table into docs/cli.md (then review and commit it).
  if (written != table && std::getenv("GPUCACHE_UPDATE_DOCS") != nullptr) {
    std::ofstream(path) << docs.substr(0, from + begin.size()) << table << docs.substr(to);
    return;
  }
  CHECK(written == table);
}
