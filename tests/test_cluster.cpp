// Packing at cluster scale through the real binary: pack --part K/N, merge, pack --append
// (docs/scale.md). The parts of a run, merged, must hold exactly the rows, values, drop counts and
// statistics of one pack of the same inputs; merge must copy no shard byte and refuse parts that
// do not belong together; append must leave every existing shard untouched.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "gpucache/common/atomic_file.hpp"
#include "gpucache/merge.hpp"
#include "gpucache/npy.hpp"
#include "gpucache/runtime.hpp"
#include "pack_test_support.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;
using test_support::run_cli;
using test_support::ScratchDir;

namespace {

// Input files of `rows` rows each, [rows, 12] f32, every 17th row NaN (dropped by pack).
std::vector<std::string> write_inputs(const ScratchDir& scratch, std::size_t files,
                                      std::uint64_t rows, std::uint64_t dim = 12) {
  std::vector<std::string> paths;
  for (std::size_t f = 0; f < files; ++f) {
    std::mt19937 random(static_cast<unsigned>(f + 1));
    std::normal_distribution<float> normal;
    const std::string path = scratch / ("in-" + std::to_string(f) + ".npy");
    write_npy(path, DType::f32, {rows, dim},
              [&](std::span<std::byte> out, std::uint64_t first, std::uint64_t) {
                auto* values = reinterpret_cast<float*>(out.data());
                for (std::size_t i = 0; i < out.size() / 4; ++i)
                  values[i] = (first + i / dim) % 17 == 5 ? NAN : normal(random);
              });
    paths.push_back(path);
  }
  return paths;
}

void pack_ok(std::vector<std::string> arguments) {
  arguments.insert(arguments.begin(), "pack");
  arguments.push_back("--quiet");
  const auto result = run_cli(arguments);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
}

std::string error_of(std::vector<std::string> arguments) {
  const auto result = run_cli(arguments);
  CHECK(result.exit_code == 2);
  return result.err;
}

void verify_ok(const std::string& dataset) {
  const auto result = run_cli({"verify", dataset, "--quiet"});
  INFO(result.out);
  CHECK(result.exit_code == 0);
}

// Every column of the dataset exported as .npy, read back as bytes.
std::map<std::string, std::vector<char>> exported(const std::string& dataset,
                                                  const ScratchDir& scratch) {
  const std::string out = scratch / ("export-" + fs::path(dataset).filename().string());
  const auto result = run_cli({"export", dataset, "--to", "npy", out});
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  std::map<std::string, std::vector<char>> columns;
  for (const auto& entry : fs::directory_iterator(out))
    columns[entry.path().filename().string()] = test_support::read_bytes(entry.path().string());
  return columns;
}

std::vector<std::string> with(std::vector<std::string> list, const std::vector<std::string>& more) {
  list.insert(list.end(), more.begin(), more.end());
  return list;
}

// Packs every part K/N of the inputs, then merges them (given in reverse: merge orders by K).
std::string pack_and_merge(const ScratchDir& scratch, const std::vector<std::string>& inputs,
                           unsigned parts, const std::vector<std::string>& options) {
  std::vector<std::string> merge{"merge"};
  for (unsigned k = parts; k-- > 0;) {
    const std::string out = scratch / ("part-" + std::to_string(k));
    pack_ok(
        with(with(inputs, {"-o", out, "--part", std::to_string(k) + "/" + std::to_string(parts)}),
             options));
    merge.push_back(out);
  }
  const std::string merged = scratch / "merged";
  const auto result = run_cli(with(merge, {"-o", merged}));
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out.find("hard-linked, none copied") != std::string::npos);
  verify_ok(merged);
  return merged;
}

void check_same_as_single_pack(const ScratchDir& scratch, const std::string& merged,
                               const std::vector<std::string>& inputs,
                               const std::vector<std::string>& options) {
  const std::string single = scratch / "single";
  pack_ok(with(with(inputs, {"-o", single}), options));
  CHECK(exported(merged, scratch) == exported(single, scratch));
  const auto a = test_support::manifest_json(merged), b = test_support::manifest_json(single);
  CHECK(a["rows"] == b["rows"]);
  CHECK(a["dropped"] == b["dropped"]);
  CHECK(a["rows_checked"] == b["rows_checked"]);
  CHECK(a["inputs"] == b["inputs"]);
  CHECK(a["options"] == b["options"]);
  const auto& x = a["norm_stats"]["embedding"];
  const auto& y = b["norm_stats"]["embedding"];
  CHECK(x["count"] == y["count"]);
  CHECK(x["min"] == y["min"]);
  CHECK(x["max"] == y["max"]);
  CHECK(x["histogram"] == y["histogram"]);
  CHECK(std::abs(x["mean"].get<double>() - y["mean"].get<double>()) < 1e-9);
}

}  // namespace

TEST_CASE("four parts of whole files, merged, equal one pack of the sorted inputs") {
  ScratchDir scratch;
  auto inputs = write_inputs(scratch, 7, 300);
  std::reverse(inputs.begin(), inputs.end());  // parts sort them; so does the rule's documentation
  const std::vector<std::string> options{"--shard-rows", "100"};
  const auto merged = pack_and_merge(scratch, inputs, 4, options);
  std::sort(inputs.begin(), inputs.end());
  check_same_as_single_pack(scratch, merged, inputs, options);
  // The parts follow the documented rule: part K gets files [K*7/4, (K+1)*7/4).
  CHECK(test_support::manifest_json(scratch / "part-0")["inputs"].size() == 1);
  CHECK(test_support::manifest_json(scratch / "part-3")["inputs"].size() == 2);
  CHECK(test_support::manifest_json(scratch / "part-3")["part"]["first_input"] == 5);
  const auto merge = test_support::manifest_json(merged)["merge"];
  CHECK(merge["parts"].size() == 4);
  CHECK(merge["parts"][2]["part"]["index"] == 2);
  CHECK(test_support::manifest_json(merged)["segments"].size() == 4);
  // The runtime reads the merged dataset, every shard checked against its segment.
  const auto host = runtime::Dataset::open(merged).to_host();
  CHECK(host.rows() == test_support::manifest_json(merged)["rows"].get<std::uint64_t>());
  const auto inspect = run_cli({"inspect", merged});
  CHECK(inspect.out.find("merged from 4 parts") != std::string::npos);
}

TEST_CASE("parts of one file are row ranges; merged they equal one pack") {
  ScratchDir scratch;
  const auto inputs = write_inputs(scratch, 1, 1000);
  const std::vector<std::string> options{"--shard-rows", "64", "--dedup"};
  const auto merged = pack_and_merge(scratch, inputs, 3, options);
  check_same_as_single_pack(scratch, merged, inputs, options);
  CHECK(test_support::manifest_json(scratch / "part-1")["part"]["rule"] == "rows");
  CHECK(test_support::manifest_json(scratch / "part-1")["part"]["row_ranges"][0]["first_row"] ==
        333);
  CHECK(test_support::manifest_json(merged)["merge"]["dedup"] == "per part");
}

TEST_CASE("a part is deterministic: the same K/N gives the same bytes") {
  ScratchDir scratch;
  const auto inputs = write_inputs(scratch, 3, 200);
  pack_ok(with(inputs, {"-o", scratch / "a", "--part", "1/2"}));
  pack_ok(with(inputs, {"-o", scratch / "b", "--part", "1/2"}));
  CHECK(exported(scratch / "a", scratch) == exported(scratch / "b", scratch));
  CHECK(test_support::read_bytes(scratch / "a/manifest.json") ==
        test_support::read_bytes(scratch / "b/manifest.json"));
  CHECK(test_support::read_bytes(scratch / "a/shard-00000.gcs") ==
        test_support::read_bytes(scratch / "b/shard-00000.gcs"));
  CHECK(error_of({"pack", inputs[0], "-o", scratch / "c", "--part", "2/2"}).find("0 <= K < N") !=
        std::string::npos);
}

TEST_CASE("merge hard-links shards, copies none, and leaves the parts valid") {
  ScratchDir scratch;
  const auto inputs = write_inputs(scratch, 2, 200);
  const auto merged = pack_and_merge(scratch, inputs, 2, {"--shard-rows", "50"});
  struct stat part_shard {
  }, merged_shard{};
  REQUIRE(::stat((scratch / "part-1/shard-00000.gcs").c_str(), &part_shard) == 0);
  const auto first_of_part_1 =
      test_support::manifest_json(merged)["merge"]["parts"][1]["first_shard"].get<int>();
  char name[32];
  std::snprintf(name, sizeof name, "/shard-%05d.gcs", first_of_part_1);
  REQUIRE(::stat((merged + name).c_str(), &merged_shard) == 0);
  CHECK(part_shard.st_ino == merged_shard.st_ino);
  CHECK(part_shard.st_nlink == 2);
  verify_ok(scratch / "part-0");
  verify_ok(scratch / "part-1");
}

TEST_CASE("merge refuses parts that do not belong together, naming the difference") {
  ScratchDir scratch;
  const auto inputs = write_inputs(scratch, 2, 100);
  pack_ok(with(inputs, {"-o", scratch / "p0", "--part", "0/2"}));
  pack_ok(with(inputs, {"-o", scratch / "p1", "--part", "1/2", "--dtype", "f16"}));
  pack_ok(with(inputs, {"-o", scratch / "q1", "--part", "1/2", "--norm-min", "0.5"}));
  auto message = error_of({"merge", scratch / "p0", scratch / "p1", "-o", scratch / "m"});
  CHECK(message.find("embedding") != std::string::npos);
  CHECK(message.find("f16") != std::string::npos);
  message = error_of({"merge", scratch / "p0", scratch / "q1", "-o", scratch / "m"});
  CHECK(message.find("option validation.norm_min is 0.1") != std::string::npos);
  const ScratchDir other;
  const auto wide = write_inputs(other, 1, 100, 20);
  pack_ok({wide[0], "-o", scratch / "wide"});
  pack_ok({inputs[0], "-o", scratch / "narrow"});
  message = error_of({"merge", scratch / "narrow", scratch / "wide", "-o", scratch / "m"});
  CHECK(message.find("column 0 is 'embedding' tensor f32 [20]") != std::string::npos);
  CHECK(error_of({"merge", scratch / "p0", "-o", scratch / "m"}).find("parts 1 of 2 are missing") !=
        std::string::npos);
  CHECK(error_of({"merge", scratch / "p0", scratch / "p0", "-o", scratch / "m"})
            .find("given twice") != std::string::npos);
  CHECK_FALSE(fs::exists(scratch / "m"));
  CHECK(error_of({"merge", scratch / "narrow", "-o", scratch / "p0"}).find("already exists") !=
        std::string::npos);
}

TEST_CASE("a killed merge leaves the parts intact and no output; the next merge finishes") {
  ScratchDir scratch;
  const auto inputs = write_inputs(scratch, 2, 100);
  pack_ok(with(inputs, {"-o", scratch / "p0", "--part", "0/2"}));
  pack_ok(with(inputs, {"-o", scratch / "p1", "--part", "1/2"}));
  // What SIGKILL during a merge leaves: the hidden staging directory with some links, no output.
  const fs::path staging = scratch / ".m.merging";
  fs::create_directories(staging);
  fs::create_hard_link(scratch / "p0/shard-00000.gcs", staging / "shard-00000.gcs");
  verify_ok(scratch / "p0");
  CHECK_FALSE(fs::exists(scratch / "m"));
  const auto result = run_cli({"merge", scratch / "p0", scratch / "p1", "-o", scratch / "m"});
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_FALSE(fs::exists(staging));
  verify_ok(scratch / "m");
  verify_ok(scratch / "p0");
}

TEST_CASE("merge onto another file system needs --copy, which copies") {
  ScratchDir scratch;
  struct stat here {
  }, shm{};
  if (::stat(scratch.path().c_str(), &here) != 0 || ::stat("/dev/shm", &shm) != 0 ||
      here.st_dev == shm.st_dev || ::access("/dev/shm", W_OK) != 0) {
    MESSAGE("skipped: /dev/shm is not a writable file system of its own here");
    return;
  }
  const auto inputs = write_inputs(scratch, 2, 100);
  pack_ok(with(inputs, {"-o", scratch / "p0", "--part", "0/2"}));
  pack_ok(with(inputs, {"-o", scratch / "p1", "--part", "1/2"}));
  const std::string out = "/dev/shm/gpucache-merge-test-" + std::to_string(::getpid());
  const auto message = error_of({"merge", scratch / "p0", scratch / "p1", "-o", out});
  CHECK(message.find("another file system") != std::string::npos);
  CHECK(message.find("--copy") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  const auto result = run_cli({"merge", scratch / "p0", scratch / "p1", "-o", out, "--copy"});
  CHECK(result.exit_code == 0);
  CHECK(result.out.find("bytes copied") != std::string::npos);
  verify_ok(out);
  fs::remove_all(out);

  // Copied shards are new data: fsynced before the manifest names them, unless --no-fsync. (A
  // hard-linked shard shares data its pack already made durable.)
  MergeOptions options;
  options.parts = {scratch / "p0", scratch / "p1"};
  options.output_dir = out;
  options.copy = true;
  const auto before = detail::fsync_count();
  const auto copied = merge(options);
  // Every shard, the manifest and its (staging) folder, and the output's parent.
  CHECK(detail::fsync_count() - before == copied.shards + 3);
  verify_ok(out);
  fs::remove_all(out);
  options.fsync = false;
  const auto before_unflushed = detail::fsync_count();
  merge(options);
  CHECK(detail::fsync_count() == before_unflushed);
  verify_ok(out);
  fs::remove_all(out);
}

TEST_CASE("append adds shards, rewrites none, and an open reader keeps the old rows") {
  ScratchDir scratch;
  const auto inputs = write_inputs(scratch, 2, 300);
  const std::string dataset = scratch / "ds";
  pack_ok({inputs[0], "-o", dataset, "--shard-rows", "100"});
  const auto before = test_support::manifest_json(dataset);
  std::map<std::string, std::pair<std::vector<char>, fs::file_time_type>> old_shards;
  for (const auto& shard : before["shards"]) {
    const std::string path = dataset + "/" + shard["file"].get<std::string>();
    old_shards[path] = {test_support::read_bytes(path), fs::last_write_time(path)};
  }
  const auto reader = runtime::Dataset::open(dataset);
  pack_ok({inputs[1], "--append", dataset, "--shard-rows", "100"});
  verify_ok(dataset);
  for (const auto& [path, state] : old_shards) {
    CHECK(test_support::read_bytes(path) == state.first);
    CHECK(fs::last_write_time(path) == state.second);
  }
  const auto after = test_support::manifest_json(dataset);
  CHECK(after["shards"].size() > before["shards"].size());
  CHECK(after["rows"].get<std::uint64_t>() > before["rows"].get<std::uint64_t>());
  CHECK_FALSE(fs::exists(dataset + "/.append"));
  // The reader opened before the append loads exactly the old rows; a new one sees all.
  CHECK(reader.to_host().rows() == before["rows"].get<std::uint64_t>());
  CHECK(runtime::Dataset::open(dataset).to_host().rows() == after["rows"].get<std::uint64_t>());
  // The same as one pack of both inputs.
  pack_ok({inputs[0], inputs[1], "-o", scratch / "both", "--shard-rows", "100"});
  CHECK(exported(dataset, scratch)["embedding.npy"] ==
        exported(scratch / "both", scratch)["embedding.npy"]);
  const auto message = error_of({"pack", inputs[1], "--append", dataset});
  CHECK(message.find("option shard_rows is 100 in the dataset but null in this run") !=
        std::string::npos);
}

// --append compares the stored columns, not the option text: f16 rows stored as f32 by --dtype
// join a dataset whose f32 rows needed no option; rows that would be stored as f16 are refused,
// naming the column, both dtypes and the option that fixes it.
TEST_CASE("append compares what is stored: an f16 input with --dtype f32 joins an f32 dataset") {
  ScratchDir scratch;
  // Values every f16 holds exactly: 0.5, 1, -1, 2, 0.25.
  constexpr std::uint16_t kHalves[] = {0x3800, 0x3C00, 0xBC00, 0x4000, 0x3400};
  constexpr float kFloats[] = {0.5f, 1.0f, -1.0f, 2.0f, 0.25f};
  constexpr std::uint64_t kRows = 50, kDim = 12;
  auto pick = [](std::uint64_t i) { return (i * 7 + i / kDim) % 5; };
  const std::string f32_file = scratch / "f32.npy", f16_file = scratch / "f16.npy";
  write_npy(f32_file, DType::f32, {kRows, kDim},
            [&](std::span<std::byte> out, std::uint64_t first, std::uint64_t) {
              for (std::size_t i = 0; i < out.size() / 4; ++i)
                std::memcpy(out.data() + 4 * i, &kFloats[pick(first * kDim + i)], 4);
            });
  write_npy(f16_file, DType::f16, {kRows, kDim},
            [&](std::span<std::byte> out, std::uint64_t first, std::uint64_t) {
              for (std::size_t i = 0; i < out.size() / 2; ++i)
                std::memcpy(out.data() + 2 * i, &kHalves[pick(first * kDim + i)], 2);
            });
  const std::string dataset = scratch / "ds";
  pack_ok({f32_file, "-o", dataset});
  pack_ok({f16_file, "--append", dataset, "--dtype", "f32"});
  verify_ok(dataset);
  const auto manifest = test_support::manifest_json(dataset);
  CHECK(manifest["rows"] == 2 * kRows);
  CHECK(manifest["columns"][0]["dtype"] == "f32");
  // The appended rows are the f32 file's rows again.
  const auto columns = exported(dataset, scratch);
  const auto& both = columns.at("embedding.npy");
  REQUIRE(both.size() > 2 * kRows * kDim * 4);
  const std::size_t header = both.size() - 2 * kRows * kDim * 4;
  CHECK(std::equal(both.begin() + static_cast<std::ptrdiff_t>(header),
                   both.begin() + static_cast<std::ptrdiff_t>(header + kRows * kDim * 4),
                   both.begin() + static_cast<std::ptrdiff_t>(header + kRows * kDim * 4)));

  // Without --dtype the f16 rows would be stored as f16: a real mismatch.
  const auto message = error_of({"pack", f16_file, "--append", dataset});
  CHECK(message.find("column 'embedding'") != std::string::npos);
  CHECK(message.find("is stored as f16 but in " + dataset + " as f32") != std::string::npos);
  CHECK(message.find("--dtype embedding=f32") != std::string::npos);
  CHECK(test_support::manifest_json(dataset)["rows"] == 2 * kRows);
  CHECK_FALSE(fs::exists(dataset + "/.append"));
  verify_ok(dataset);
}

// A merge killed with SIGKILL at many points of its run: whatever the moment, the parts still
// verify and the output either does not exist or is the whole dataset (it verifies); a rerun then
// finishes it.
TEST_CASE("merge killed with SIGKILL at any moment: parts intact, no output or all of it") {
  ScratchDir scratch;
  const auto inputs = write_inputs(scratch, 4, 400);
  for (int k = 0; k < 4; ++k)
    pack_ok(with(inputs, {"-o", scratch / ("p" + std::to_string(k)), "--part",
                          std::to_string(k) + "/4", "--shard-rows", "8"}));
  const std::string out = scratch / "m";
  std::string command = test_support::shell_quote(GPUCACHE_CLI_PATH) + " merge";
  for (int k = 0; k < 4; ++k)
    command += " " + test_support::shell_quote(scratch / ("p" + std::to_string(k)));
  command += " -o " + test_support::shell_quote(out) + " >/dev/null 2>&1";
  int complete = 0;
  for (int delay_us = 0; delay_us < 40000; delay_us += 2000) {
    fs::remove_all(out);
    // A simple command run in the background is the merge process itself: $! is its pid.
    const std::string killed = command + " & pid=$!; sleep " + std::to_string(delay_us / 1e6) +
                               "; kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null; true";
    std::system(killed.c_str());
    CAPTURE(delay_us);
    if (fs::exists(out)) {
      verify_ok(out);
      ++complete;
    }
    for (int k = 0; k < 4; ++k) verify_ok(scratch / ("p" + std::to_string(k)));
  }
  MESSAGE(complete << " of 20 killed merges had finished before the kill");
  fs::remove_all(out);
  const auto result =
      run_cli({"merge", scratch / "p0", scratch / "p1", scratch / "p2", scratch / "p3", "-o", out});
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  verify_ok(out);
}

// An append killed after its staging pack finished but before it linked the shards in: the
// dataset is still the old one for readers, and `--append --resume` links the staged shards in.
TEST_CASE("an interrupted append is finished by --append --resume") {
  ScratchDir scratch;
  const auto inputs = write_inputs(scratch, 2, 100);
  const std::string dataset = scratch / "ds";
  pack_ok({inputs[0], "-o", dataset});
  pack_ok({inputs[1], "-o", dataset + "/.append"});  // what the killed append had packed
  // A shard a killed append had linked in under the next number, not yet listed.
  fs::copy_file(dataset + "/.append/shard-00000.gcs", dataset + "/shard-00001.gcs");
  CHECK(runtime::Dataset::open(dataset).to_host().rows() ==
        test_support::manifest_json(dataset)["rows"]);
  const auto result = run_cli({"pack", inputs[1], "--append", dataset, "--resume", "--quiet"});
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out.find("resumed: 1 shards") != std::string::npos);
  verify_ok(dataset);
  CHECK(test_support::manifest_json(dataset)["shards"].size() == 2);
  CHECK_FALSE(fs::exists(dataset + "/.append"));
}
