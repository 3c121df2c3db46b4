// Pack's per-row bookkeeping (verdicts, norms, hashes, kept rows) moves from the heap into
// unlinked files once it outgrows a limit (common/spill_array.hpp), so that memory stays bounded
// whatever the row count (scripts/check_memory.sh measures that). Here: the array itself, and that
// a Validator and a whole pack give exactly the same results whether their arrays spill or not.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "gpucache/common/spill_array.hpp"
#include "gpucache/error.hpp"
#include "gpucache/validate.hpp"
#include "pack_test_support.hpp"
#include "test_support.hpp"

using namespace gpucache;
using namespace test_support;
namespace fs = std::filesystem;

namespace {

// Fds this process has open: a spilled array holds one, which it must give back.
std::size_t open_fds() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

}  // namespace

TEST_CASE("a spill array keeps its values on the heap and after moving into a file") {
  ScratchDir scratch;
  const std::size_t fds = open_fds();
  {
    detail::SpillArray<std::uint64_t> values(detail::SpillPolicy{scratch.path(), 64});
    for (std::uint64_t i = 0; i < 8; ++i) values.push_back(i * 3);
    CHECK_FALSE(values.spilled());  // 64 bytes: still the heap
    values.push_back(24);
    CHECK(values.spilled());
    CHECK(open_fds() == fds + 1);
    // Nothing is left in the directory: the file is unlinked.
    CHECK(fs::is_empty(scratch.path()));
    for (std::uint64_t i = 9; i < 100000; ++i) values.push_back(i * 3);
    values.release(10, 50000);  // dropping resident pages loses nothing
    for (std::uint64_t i = 0; i < values.size(); ++i) REQUIRE(values[i] == i * 3);

    // Shrinking and growing again gives zeros, as on the heap.
    values.resize(5);
    values.resize(20);
    CHECK(values[4] == 12);
    for (std::size_t i = 5; i < 20; ++i) REQUIRE(values[i] == 0);

    const detail::SpillArray<std::uint64_t> copy = values;
    CHECK(copy == values);
    CHECK(copy.spilled() == values.spilled());
    detail::SpillArray<std::uint64_t> moved = std::move(values);
    CHECK(moved == copy);
    CHECK(values.empty());
  }
  CHECK(open_fds() == fds);
}

TEST_CASE("without a directory a spill array stays on the heap") {
  detail::SpillArray<std::uint32_t> values;
  values.resize(1 << 20);
  CHECK_FALSE(values.spilled());
  CHECK(values[12345] == 0);
  CHECK(values == std::vector<std::uint32_t>(1 << 20, 0));
}

TEST_CASE("a spill array that cannot make its file fails with an error naming the directory") {
  ScratchDir scratch;
  const std::string missing = scratch / "missing";
  detail::SpillArray<std::uint64_t> values(detail::SpillPolicy{missing, 0});
  try {
    values.resize(10);
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(std::string(error.what()).find(missing) != std::string::npos);
    CHECK(std::string(error.what()).find("row bookkeeping") != std::string::npos);
  }
}

namespace {

// Rows with every verdict: NaN, zero, norms out of range, duplicates within and across columns,
// pairs with a low cosine; three sources in batches that arrive out of order.
struct Rows {
  static constexpr std::uint64_t kRows = 3000, kDim = 8;
  std::vector<float> a, b;
  Rows() : a(kRows * kDim), b(kRows * kDim) {
    std::mt19937_64 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& v : a) v = normal(rng);
    for (auto& v : b) v = normal(rng);
    for (std::uint64_t r = 0; r < kRows; r += 37) a[r * kDim + 2] = std::nanf("");
    for (std::uint64_t r = 5; r < kRows; r += 53) std::fill_n(&b[r * kDim], kDim, 0.0f);
    for (std::uint64_t r = 7; r < kRows; r += 41) a[r * kDim] = 500.0f;
    for (std::uint64_t r = 11; r < kRows; r += 29)  // duplicates of an earlier row
      std::copy_n(&a[(r - 10) * kDim], kDim, &a[r * kDim]);
    for (std::uint64_t r = 13; r < kRows; r += 31)  // b opposite to a: cosine -1
      for (std::uint64_t i = 0; i < kDim; ++i) b[r * kDim + i] = -a[r * kDim + i];
  }
};

ValidationResult validate(const Rows& rows, ValidationOptions options, const std::string& spill,
                          std::uint64_t heap_limit) {
  options.device = Device::cpu;
  Validator validator(options, std::vector<std::uint64_t>{Rows::kDim, Rows::kDim});
  if (!spill.empty()) validator.spill_to(spill, heap_limit);
  const std::uint64_t batch = 700;
  for (std::uint64_t first : {2100ull, 0ull, 1400ull, 700ull, 2800ull}) {
    const std::uint64_t count = std::min(batch, Rows::kRows - first);
    const float* columns[] = {rows.a.data() + first * Rows::kDim,
                              rows.b.data() + first * Rows::kDim};
    validator.check_batch(columns, first, count, static_cast<std::uint32_t>(first / 1000));
  }
  return validator.finish([&](std::uint64_t row, std::size_t column, std::span<float> out) {
    const auto& values = column == 0 ? rows.a : rows.b;
    std::copy_n(&values[row * Rows::kDim], Rows::kDim, out.data());
  });
}

void check_same(const ValidationResult& spilled, const ValidationResult& heap) {
  CHECK(spilled.rows == heap.rows);
  CHECK(spilled.reasons == heap.reasons);
  CHECK(spilled.sampled_out == heap.sampled_out);
  REQUIRE(spilled.rejects.size() == heap.rejects.size());
  for (std::size_t i = 0; i < heap.rejects.size(); ++i) {
    const auto& x = spilled.rejects[i];
    const auto& y = heap.rejects[i];
    CHECK(x.row == y.row);
    CHECK(x.source == y.source);
    CHECK(x.source_row == y.source_row);
    CHECK(x.reason == y.reason);
    CHECK(x.column == y.column);
    CHECK(std::memcmp(&x.norm, &y.norm, sizeof(double)) == 0);
    CHECK(x.pair_cosine == y.pair_cosine);
  }
  REQUIRE(spilled.sources.size() == heap.sources.size());
  for (std::size_t i = 0; i < heap.sources.size(); ++i) {
    CHECK(spilled.sources[i].rows == heap.sources[i].rows);
    CHECK(spilled.sources[i].reasons == heap.sources[i].reasons);
  }
  REQUIRE(spilled.norms.size() == heap.norms.size());
  for (std::size_t i = 0; i < heap.norms.size(); ++i) {
    CHECK(spilled.norms[i].bin_counts == heap.norms[i].bin_counts);
    CHECK(spilled.norms[i].bin_edges == heap.norms[i].bin_edges);
    CHECK(spilled.norms[i].mean == heap.norms[i].mean);
  }
}

}  // namespace

TEST_CASE("a Validator whose per-row arrays spill gives exactly the heap's result") {
  const Rows rows;
  ScratchDir scratch;
  struct Variant {
    const char* name;
    void (*set)(ValidationOptions&);
  };
  const Variant variants[] = {
      {"defaults", [](ValidationOptions&) {}},
      {"dedup", [](ValidationOptions& o) { o.dedup = true; }},
      {"pair cosine", [](ValidationOptions& o) { o.pair_cos_min = 0.0; }},
      {"open norm bounds", [](ValidationOptions& o) { o.norm_min = 0.0, o.norm_max = INFINITY; }},
      {"sampling", [](ValidationOptions& o) { o.sample_fraction = 0.5, o.seed = 3; }},
      {"shuffle", [](ValidationOptions& o) { o.shuffle = true, o.seed = 5; }},
      {"everything",
       [](ValidationOptions& o) {
         o.dedup = o.shuffle = true;
         o.pair_cos_min = -0.5;
         o.max_rows_per_source = 600;
       }},
  };
  for (const auto& variant : variants) {
    CAPTURE(variant.name);
    ValidationOptions options;
    variant.set(options);
    const ValidationResult heap = validate(rows, options, "", 0);
    CHECK_FALSE(heap.rows.spilled());
    for (std::uint64_t limit : {0ull, 4096ull}) {
      CAPTURE(limit);
      const ValidationResult spilled = validate(rows, options, scratch.path(), limit);
      CHECK(spilled.rows.spilled());
      check_same(spilled, heap);
    }
  }
}

TEST_CASE("pack writes the same dataset when its row bookkeeping spills to files") {
  ScratchDir scratch;
  std::vector<float> values(5000 * 24);
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : values) v = normal(rng);
  for (std::size_t r = 0; r < 5000; r += 17) values[r * 24] = std::nanf("");
  const std::string input = scratch / "rows.npy";
  save_npy(input, DType::f32, {5000, 24}, values);
  const std::vector<std::vector<std::string>> runs{
      {"--dtype", "f16"},
      {"--split", "train=0.8,val=0.2", "--seed", "4"},
      {"--shuffle", "--seed", "9", "--shard-rows", "700"},
  };
  for (const auto& extra : runs) {
    CAPTURE(extra.front());
    auto pack = [&](const std::string& out, const char* heap_limit) {
      if (heap_limit)
        ::setenv("GPUCACHE_ROW_HEAP_LIMIT", heap_limit, 1);
      else
        ::unsetenv("GPUCACHE_ROW_HEAP_LIMIT");
      std::vector<std::string> arguments{"pack", input, "-o", out, "--quiet"};
      arguments.insert(arguments.end(), extra.begin(), extra.end());
      const auto result = run_cli(arguments);
      ::unsetenv("GPUCACHE_ROW_HEAP_LIMIT");
      REQUIRE_MESSAGE(result.exit_code == 0, result.err);
    };
    const std::string heap = scratch / ("heap" + extra.front());
    const std::string spilled = scratch / ("spilled" + extra.front());
    pack(heap, nullptr);
    pack(spilled, "0");
    std::size_t compared = 0;
    for (const auto& entry : fs::recursive_directory_iterator(heap)) {
      if (!entry.is_regular_file()) continue;
      const std::string name = fs::relative(entry.path(), heap).string();
      CAPTURE(name);
      const std::string other = (fs::path(spilled) / name).string();
      REQUIRE(fs::exists(other));
      if (entry.path().extension() == ".json") continue;  // names the output directory
      CHECK(read_bytes(entry.path().string()) == read_bytes(other));
      ++compared;
    }
    CHECK(compared > 0);
    // No bookkeeping file is left beside the output.
    for (const auto& entry : fs::directory_iterator(scratch.path()))
      CHECK(entry.path().filename().string().find(".gpucache-rows") == std::string::npos);
  }
}
