// The corruption matrix, through the real gpucache binary: on a packed dataset of three shards,
// flip a byte at sampled positions in every region of every shard (header, column table, the gap
// before the data, each column's values, row padding, alignment padding, chunk table, footer),
// truncate and extend every shard, swap, delete and add shards, and edit the manifest (with and
// without recomputing its hash). `gpucache verify` must exit 1 for every mutation and name the
// file and the place: a problem in the damaged file whose byte range or location covers the
// flipped byte, with the region's name (header, column table, the column, padding, ...). The
// runtime reader (src/runtime/include/gpucache/runtime.hpp), opening the dataset and loading it to
// the host with verification on, must refuse every mutation of the shard files too (an extra file
// the manifest does not list is no part of the dataset for it). It checks the manifest's hash, not
// its content against the shards' data, so manifest content edits are verify's alone.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "gpucache/common/hash.hpp"
#include "gpucache/npy.hpp"
#include "gpucache/runtime.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard/shard_layout.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;
using test_support::run_cli;

namespace {

constexpr std::uint64_t kRows = 60, kDim = 10, kShardRows = 20;

// Packs kRows rows of kDim f32 values into three shards with the CLI.
std::string pack_dataset(const test_support::ScratchDir& scratch, bool compressed) {
  std::mt19937 random(11);
  std::normal_distribution<float> normal;
  write_npy(scratch / "in.npy", DType::f32, {kRows, kDim},
            [&](std::span<std::byte> out, std::uint64_t, std::uint64_t) {
              auto* values = reinterpret_cast<float*>(out.data());
              for (std::size_t i = 0; i < out.size() / 4; ++i) values[i] = normal(random);
            });
  const std::string dataset = scratch / "ds";
  std::vector<std::string> arguments{"pack",         scratch / "in.npy",         "-o",     dataset,
                                     "--shard-rows", std::to_string(kShardRows), "--quiet"};
  if (compressed) arguments.push_back("--compress=zstd:3");
  const auto packed = run_cli(arguments);
  INFO(packed.err);
  REQUIRE(packed.exit_code == 0);
  REQUIRE(run_cli({"verify", dataset, "--quiet"}).exit_code == 0);
  return dataset;
}

// A named part of a shard file: one or more [begin, end) byte intervals, and a word the verify
// report must use for it (in the location or the cause).
struct Region {
  std::string name;
  std::string keyword;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> intervals;
};

std::vector<Region> regions_of(const std::vector<char>& file) {
  const auto bytes = std::as_bytes(std::span(file.data(), file.size()));
  const auto layout = shard::decode_layout(bytes, "pristine");
  const auto& h = layout.header;
  const std::uint64_t table_end = shard::kHeaderSize + h.column_count * shard::kColumnEntrySize;
  std::vector<Region> regions{
      {"header", "header", {{0, shard::kHeaderSize}}},
      {"column table", "column table", {{shard::kHeaderSize, table_end}}},
      {"gap before the data", "byte", {{table_end, h.data_offset}}},
  };
  if (h.compressed()) {
    regions.push_back(
        {"stored chunks", "column '", {{h.data_offset, h.data_offset + h.stored_data_size}}});
  } else {
    Region alignment{"alignment padding", "padding", {}};
    std::uint64_t cursor = h.data_offset;
    for (const auto& column : layout.columns) {
      if (column.data_offset > cursor) alignment.intervals.emplace_back(cursor, column.data_offset);
      Region values{"column '" + column.name + "' values", "column '" + column.name + "'", {}};
      Region padding{"column '" + column.name + "' row padding", "padding", {}};
      const std::uint64_t value_bytes = column.dim() * dtype_size(column.dtype);
      for (std::uint64_t row = 0; row < h.row_count; ++row) {
        const std::uint64_t begin = column.data_offset + row * column.row_pitch_bytes();
        values.intervals.emplace_back(begin, begin + value_bytes);
        if (column.row_pitch_bytes() > value_bytes)
          padding.intervals.emplace_back(begin + value_bytes, begin + column.row_pitch_bytes());
      }
      regions.push_back(values);
      if (!padding.intervals.empty()) regions.push_back(padding);
      cursor = column.data_offset + column.data_size;
    }
    if (h.data_offset + h.data_size > cursor)
      alignment.intervals.emplace_back(cursor, h.data_offset + h.data_size);
    regions.push_back(alignment);
  }
  const std::uint64_t stored_end = h.data_offset + h.stored_data_size;
  if (h.chunk_table_offset > stored_end)
    regions.push_back({"gap before the chunk table", "byte", {{stored_end, h.chunk_table_offset}}});
  regions.push_back({"chunk table",
                     "chunk table",
                     {{h.chunk_table_offset, h.chunk_table_offset + h.chunk_count * 24}}});
  regions.push_back({"footer", "footer", {{file.size() - shard::kFooterSize, file.size()}}});
  return regions;
}

// The first and last byte of a region and `extra` random ones in between.
std::vector<std::uint64_t> sample_positions(const Region& region, std::mt19937_64& random,
                                            int extra) {
  std::uint64_t total = 0;
  for (const auto& [begin, end] : region.intervals) total += end - begin;
  auto nth = [&](std::uint64_t n) {
    for (const auto& [begin, end] : region.intervals) {
      if (n < end - begin) return begin + n;
      n -= end - begin;
    }
    return region.intervals.back().second - 1;
  };
  std::vector<std::uint64_t> positions{nth(0), nth(total - 1)};
  for (int i = 0; i < extra; ++i) positions.push_back(nth(random() % total));
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  return positions;
}

nlohmann::json verify_json(const std::string& dataset) {
  const auto result = run_cli({"verify", dataset, "--json"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 1);
  const auto report = nlohmann::json::parse(result.out);
  REQUIRE(report["ok"] == false);
  REQUIRE_FALSE(report["problems"].empty());
  return report;
}

// Byte ranges a problem names: its byte_begin..byte_end, and "bytes A-B" or "byte N" in its
// location (a single byte offset names the 8-byte field that starts there).
bool covers(const nlohmann::json& problem, std::uint64_t position) {
  if (problem.contains("byte_begin") && problem["byte_begin"].get<std::uint64_t>() <= position &&
      position <= problem["byte_end"].get<std::uint64_t>())
    return true;
  const std::string location = problem["location"];
  static const std::regex range(R"(bytes (\d+)-(\d+))"), single(R"(byte (\d+))");
  std::smatch match;
  if (std::regex_search(location, match, range))
    return std::stoull(match[1]) <= position && position <= std::stoull(match[2]);
  if (std::regex_search(location, match, single))
    return std::stoull(match[1]) <= position && position < std::stoull(match[1]) + 8;
  return false;
}

std::string problems_text(const nlohmann::json& report) {
  return report["problems"].dump(1);
}

// The runtime reader refuses the dataset: open, then load every column to the host with chunk
// verification. Returns the error text, or nothing when it loaded.
std::optional<std::string> runtime_refusal(const std::string& dataset) {
  try {
    const auto opened = runtime::Dataset::open(dataset);
    runtime::HostOptions options;
    options.verify = true;
    const auto host = opened.to_host(options);
    return std::nullopt;
  } catch (const Error& error) {
    return std::string(error.what());
  }
}

void check_runtime_refuses(const std::string& dataset) {
  const auto refusal = runtime_refusal(dataset);
  CHECK_MESSAGE(refusal.has_value(), "the runtime reader loaded a corrupted dataset");
}

bool any_problem(const nlohmann::json& report, const std::string& file,
                 const std::function<bool(const nlohmann::json&)>& predicate) {
  for (const auto& problem : report["problems"])
    if (problem["file"] == file && predicate(problem)) return true;
  return false;
}

bool mentions(const nlohmann::json& problem, const std::string& word) {
  const std::string text =
      problem["location"].get<std::string>() + " " + problem["cause"].get<std::string>();
  return text.find(word) != std::string::npos;
}

std::vector<std::string> shard_names(const std::string& dataset) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dataset))
    if (entry.path().extension() == ".gcs") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Flips sampled bytes of every region of every shard, one at a time, restoring the shard after.
void flip_matrix(const std::string& dataset, int extra_per_region, bool runtime_too) {
  std::mt19937_64 random(2024);
  const auto names = shard_names(dataset);
  REQUIRE(names.size() == kRows / kShardRows);
  std::size_t mutations = 0;
  for (const auto& name : names) {
    const std::string path = dataset + "/" + name;
    const auto pristine = test_support::read_bytes(path);
    for (const auto& region : regions_of(pristine)) {
      for (const std::uint64_t position : sample_positions(region, random, extra_per_region)) {
        auto damaged = pristine;
        const auto mask = static_cast<char>(1u << (random() % 8));
        damaged[position] = static_cast<char>(damaged[position] ^ mask);
        test_support::write_bytes(path, damaged);
        CAPTURE(name);
        CAPTURE(region.name);
        CAPTURE(position);
        const auto report = verify_json(dataset);
        CAPTURE(problems_text(report));
        CHECK(any_problem(report, name, [&](const nlohmann::json& problem) {
          return covers(problem, position) && mentions(problem, region.keyword);
        }));
        if (runtime_too) check_runtime_refuses(dataset);
        ++mutations;
      }
    }
    test_support::write_bytes(path, pristine);
  }
  MESSAGE(mutations << " single-byte flips, each reported and located");
  CHECK(run_cli({"verify", dataset, "--quiet"}).exit_code == 0);
  if (runtime_too) CHECK_FALSE(runtime_refusal(dataset).has_value());
}

// Rewrites manifest.json after edit(), recomputing manifest_hash as the writer does, so that only
// the cross-checks between manifest and shards can catch the change.
void edit_manifest_rehashed(const std::string& dataset,
                            const std::function<void(nlohmann::ordered_json&)>& edit) {
  const auto bytes = test_support::read_bytes(dataset + "/manifest.json");
  auto json = nlohmann::ordered_json::parse(bytes.begin(), bytes.end());
  edit(json);
  json.erase("manifest_hash");
  const std::string compact = json.dump();
  json["manifest_hash"] =
      detail::hex64(detail::xxh3_64(std::as_bytes(std::span(compact.data(), compact.size()))));
  const std::string text = json.dump(2) + "\n";
  test_support::write_bytes(dataset + "/manifest.json", {text.begin(), text.end()});
}

}  // namespace

TEST_CASE("corruption matrix: every flipped byte of every region of every shard is located") {
  test_support::ScratchDir scratch;
  SUBCASE("uncompressed") {
    flip_matrix(pack_dataset(scratch, false), 4, true);
  }
  // The runtime reader refuses compressed shards outright, so only verify is checked here.
  SUBCASE("zstd") {
    flip_matrix(pack_dataset(scratch, true), 2, false);
  }
}

TEST_CASE("corruption matrix: truncated and extended shards") {
  test_support::ScratchDir scratch;
  const auto dataset = pack_dataset(scratch, false);
  for (const auto& name : shard_names(dataset)) {
    const std::string path = dataset + "/" + name;
    const auto pristine = test_support::read_bytes(path);
    const std::uint64_t size = pristine.size();
    for (const std::uint64_t keep : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{255},
                                     std::uint64_t{300}, size / 2, size - 33, size - 1}) {
      test_support::write_bytes(path, {pristine.begin(), pristine.begin() + keep});
      CAPTURE(name);
      CAPTURE(keep);
      const auto report = verify_json(dataset);
      CAPTURE(problems_text(report));
      CHECK(any_problem(report, name, [](const auto& p) { return mentions(p, "truncated"); }));
      check_runtime_refuses(dataset);
    }
    for (const std::uint64_t more : {1, 32, 4096}) {
      auto longer = pristine;
      longer.insert(longer.end(), more, '\0');
      test_support::write_bytes(path, longer);
      CAPTURE(name);
      CAPTURE(more);
      const auto report = verify_json(dataset);
      CAPTURE(problems_text(report));
      CHECK(any_problem(report, name, [](const auto& p) { return mentions(p, "extended"); }));
      check_runtime_refuses(dataset);
    }
    test_support::write_bytes(path, pristine);
  }
  CHECK(run_cli({"verify", dataset, "--quiet"}).exit_code == 0);
}

TEST_CASE("corruption matrix: swapped, deleted, duplicated and extra shards") {
  test_support::ScratchDir scratch;
  const auto dataset = pack_dataset(scratch, false);
  const auto names = shard_names(dataset);
  const std::string first = dataset + "/" + names[0], second = dataset + "/" + names[1];

  SUBCASE("two shards swapped") {
    fs::rename(first, dataset + "/swap");
    fs::rename(second, first);
    fs::rename(dataset + "/swap", second);
    const auto report = verify_json(dataset);
    CAPTURE(problems_text(report));
    for (const auto& name : {names[0], names[1]})
      CHECK(any_problem(report, name, [](const auto& p) { return mentions(p, "swapped"); }));
    check_runtime_refuses(dataset);
  }
  SUBCASE("each shard deleted") {
    for (const auto& name : names) {
      const auto saved = test_support::read_bytes(dataset + "/" + name);
      fs::remove(dataset + "/" + name);
      const auto report = verify_json(dataset);
      CAPTURE(problems_text(report));
      CHECK(any_problem(report, name, [](const auto& p) { return mentions(p, "missing"); }));
      // Without the last shard the rest is a gap-free set: see the known gaps below.
      if (name != names.back()) check_runtime_refuses(dataset);
      test_support::write_bytes(dataset + "/" + name, saved);
    }
  }
  SUBCASE("one shard copied over another") {
    fs::copy_file(first, second, fs::copy_options::overwrite_existing);
    const auto report = verify_json(dataset);
    CAPTURE(problems_text(report));
    CHECK(any_problem(report, names[1], [](const auto& p) { return mentions(p, "header"); }));
    check_runtime_refuses(dataset);
  }
  SUBCASE("an extra shard") {
    fs::copy_file(first, dataset + "/shard-00003.gcs");
    const auto report = verify_json(dataset);
    CAPTURE(problems_text(report));
    CHECK(
        any_problem(report, "shard-00003.gcs", [](const auto& p) { return mentions(p, "extra"); }));
    // The runtime reads the shards the manifest lists and nothing else (as during an append).
    CHECK(runtime::Dataset::open(dataset).to_host().rows() == kRows);
  }
  SUBCASE("a leftover temporary") {
    fs::copy_file(first, dataset + "/shard-00003.gcs.tmp");
    const auto report = verify_json(dataset);
    CAPTURE(problems_text(report));
    CHECK(any_problem(report, "shard-00003.gcs.tmp",
                      [](const auto& p) { return mentions(p, "interrupted"); }));
  }
}

// Damage that leaves a gap-free, hash-consistent set of shards: verify catches it through the
// manifest, the runtime reader (which parses no JSON) through the dataset fields every shard's
// header carries since format 1.1 (shard count, dataset rows, the pack plan's hash).
TEST_CASE("corruption matrix: shard sets that are consistent on their own") {
  test_support::ScratchDir scratch;
  const auto dataset = pack_dataset(scratch, false);
  const auto names = shard_names(dataset);
  const std::string second = dataset + "/" + names[1];
  SUBCASE("the last shard deleted") {
    fs::remove(dataset + "/" + names.back());
    const auto report = verify_json(dataset);
    CHECK(any_problem(report, names.back(), [](const auto& p) { return mentions(p, "missing"); }));
    const auto refusal = runtime_refusal(dataset);
    REQUIRE(refusal.has_value());
    CHECK(refusal->find(names.back()) != std::string::npos);
    CHECK(refusal->find("missing") != std::string::npos);
  }
  SUBCASE("a shard replaced by the same shard of another dataset of the same shape") {
    // Self-consistent on its own: only the manifest's header_hash tells it apart.
    test_support::ScratchDir other_scratch;
    std::mt19937 random(99);
    std::normal_distribution<float> normal;
    write_npy(other_scratch / "in.npy", DType::f32, {kRows, kDim},
              [&](std::span<std::byte> out, std::uint64_t, std::uint64_t) {
                auto* values = reinterpret_cast<float*>(out.data());
                for (std::size_t i = 0; i < out.size() / 4; ++i) values[i] = normal(random);
              });
    REQUIRE(run_cli({"pack", other_scratch / "in.npy", "-o", other_scratch / "ds", "--shard-rows",
                     std::to_string(kShardRows), "--quiet"})
                .exit_code == 0);
    fs::copy_file(other_scratch / ("ds/" + names[1]), second, fs::copy_options::overwrite_existing);
    const auto report = verify_json(dataset);
    CAPTURE(problems_text(report));
    CHECK(any_problem(report, names[1], [](const auto& p) { return mentions(p, "manifest"); }));
    const auto refusal = runtime_refusal(dataset);
    REQUIRE(refusal.has_value());
    CHECK(refusal->find("another dataset") != std::string::npos);
  }
}

TEST_CASE("corruption matrix: manifest edits") {
  test_support::ScratchDir scratch;
  const auto dataset = pack_dataset(scratch, false);
  const std::string manifest = dataset + "/manifest.json";
  const auto pristine = test_support::read_bytes(manifest);
  auto manifest_problem = [](const std::string& word) {
    return [word](const nlohmann::json& p) { return mentions(p, word); };
  };

  SUBCASE("bytes of the manifest text flipped at 400 sampled positions") {
    // Every byte would be ~4000 verify runs (minutes under ASan); 400 seeded positions spread
    // over the whole text hit every key and value. manifest_hash covers the manifest's values
    // (SPEC.md), not its formatting: whitespace, and the 17th digit of a float that parses to the
    // same double, are no change and are skipped.
    const auto values = nlohmann::ordered_json::parse(pristine.begin(), pristine.end());
    std::mt19937_64 random(77);
    std::size_t flips = 0, no_ops = 0;
    for (int sample = 0; sample < 400; ++sample) {
      const std::size_t at = sample * pristine.size() / 400 + random() % (pristine.size() / 400);
      auto damaged = pristine;
      damaged[at] = static_cast<char>(damaged[at] ^ (1u << (random() % 7)));
      const auto reparsed = nlohmann::ordered_json::parse(damaged.begin(), damaged.end(), nullptr,
                                                          /*allow_exceptions=*/false);
      if (!reparsed.is_discarded() && reparsed == values) {
        ++no_ops;
        continue;
      }
      test_support::write_bytes(manifest, damaged);
      CAPTURE(at);
      const auto report = verify_json(dataset);
      CHECK(any_problem(report, "manifest.json", [](const auto&) { return true; }));
      ++flips;
    }
    MESSAGE(flips << " manifest byte flips, each reported (" << no_ops
                  << " flips changed no value and were skipped)");
    CHECK(flips > 300);
  }
  SUBCASE("truncated, emptied, deleted") {
    test_support::write_bytes(manifest, {pristine.begin(), pristine.begin() + pristine.size() / 2});
    CHECK(any_problem(verify_json(dataset), "manifest.json", manifest_problem("JSON")));
    test_support::write_bytes(manifest, {});
    CHECK(any_problem(verify_json(dataset), "manifest.json", manifest_problem("JSON")));
    fs::remove(manifest);
    CHECK(any_problem(verify_json(dataset), "manifest.json", manifest_problem("missing")));
    check_runtime_refuses(dataset);
  }
  SUBCASE("edited without updating manifest_hash") {
    std::string text(pristine.begin(), pristine.end());
    // The tool version: nothing but the hash covers it.
    const auto at = text.find("\"version\": \"");
    REQUIRE(at != std::string::npos);
    text.replace(at, 12, "\"version\": \"9");
    test_support::write_bytes(manifest, {text.begin(), text.end()});
    CHECK(any_problem(verify_json(dataset), "manifest.json", manifest_problem("manifest_hash")));
  }

  // Edits whose manifest_hash was recomputed: the shards themselves must contradict them.
  using Edit = std::pair<const char*, std::function<void(nlohmann::ordered_json&)>>;
  const std::vector<Edit> edits{
      {"total rows", [](auto& j) { j["rows"] = 61; }},
      {"a shard's rows", [](auto& j) { j["shards"][1]["rows"] = 19; }},
      {"a shard's first_row", [](auto& j) { j["shards"][2]["first_row"] = 41; }},
      {"a shard's bytes", [](auto& j) { j["shards"][0]["bytes"] = 1; }},
      {"a shard's header_hash",
       [](auto& j) { j["shards"][1]["header_hash"] = "0123456789abcdef"; }},
      {"a shard's file", [](auto& j) { j["shards"][1]["file"] = "shard-00000.gcs"; }},
      {"shards reordered", [](auto& j) { std::swap(j["shards"][0], j["shards"][1]); }},
      {"a shard dropped", [](auto& j) { j["shards"].erase(2); }},
      {"a column's dtype", [](auto& j) { j["columns"][0]["dtype"] = "f16"; }},
      {"a column's dim", [](auto& j) { j["columns"][0]["shape"][1] = 11; }},
      {"a column's rows", [](auto& j) { j["columns"][0]["shape"][0] = 59; }},
      {"a column's shape rank", [](auto& j) { j["columns"][0]["shape"].push_back(1); }},
      {"a column's padded_dim", [](auto& j) { j["columns"][0]["padded_dim"] = 32; }},
      {"a column's row_pitch_bytes", [](auto& j) { j["columns"][0]["row_pitch_bytes"] = 128; }},
      {"a column's rank", [](auto& j) { j["columns"][1]["rank"] = 2; }},
      {"a column's name", [](auto& j) { j["columns"][0]["name"] = "embeddings"; }},
      {"a column's kind", [](auto& j) { j["columns"][0]["kind"] = "text"; }},
      {"a column dropped", [](auto& j) { j["columns"].erase(2); }},
  };
  SUBCASE("edited with a recomputed manifest_hash") {
    for (const auto& [what_text, edit] : edits) {
      const std::string what = what_text;
      test_support::write_bytes(manifest, pristine);
      edit_manifest_rehashed(dataset, edit);
      CAPTURE(what);
      const auto result = run_cli({"verify", dataset, "--json"});
      CAPTURE(result.out);
      CHECK(result.exit_code == 1);
    }
    test_support::write_bytes(manifest, pristine);
    CHECK(run_cli({"verify", dataset, "--quiet"}).exit_code == 0);
  }
}
