// Every fuzzing finding, kept as a test with the exact expectation: the input that broke a parser
// (fuzz/regressions/<target>/) and the hand-reduced variants of the same bug. The replay test
// (test_fuzz_replay.cpp) also runs those files through the fuzz targets themselves.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "fuzz/targets.hpp"
#include "gpucache/error.hpp"
#include "gpucache/input.hpp"
#include "gpucache/jsonl.hpp"
#include "gpucache/npy.hpp"
#include "gpucache/schema.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard/shard_layout.hpp"
#include "parquet_test_support.hpp"
#include "test_support.hpp"

using namespace gpucache;
using parquet_test::parquet_built;
namespace fs = std::filesystem;

namespace {

const fs::path kRegressions =
    fs::path(GPUCACHE_TEST_DATA).parent_path().parent_path() / "fuzz" / "regressions";

std::string regression_text(const std::string& relative) {
  const auto bytes = test_support::read_bytes((kRegressions / relative).string());
  REQUIRE_FALSE(bytes.empty());
  return {bytes.begin(), bytes.end()};
}

// The bytes of a regression file, for the fuzz targets.
std::vector<std::byte> regression_bytes(const std::string& relative) {
  const auto raw = test_support::read_bytes((kRegressions / relative).string());
  std::vector<std::byte> bytes(raw.size());
  std::memcpy(bytes.data(), raw.data(), raw.size());
  return bytes;
}

// The Error a Parquet regression file is refused with (read through the registry, as pack reads).
std::string parquet_refusal(const std::string& name) {
  try {
    (void)read_input((kRegressions / "parquet" / name).string(), ReadOptions{1});
  } catch (const Error& error) {
    return error.what();
  }
  FAIL("accepted: " << name);
  return {};
}

shard::Manifest parse(const std::string& text) {
  bool hash_ok = true;
  return shard::parse_manifest(text, "manifest.json", hash_ok);
}

// A valid manifest with `replace` substituted for `find`.
std::string manifest_with(const std::string& find, const std::string& replace) {
  std::string text =
      R"({"format": "gpucache-dataset", "format_version": 1, "tool": {"name": "gpucache", )"
      R"("version": "0.1.0"}, "rows": 4, "columns": [{"name": "embedding", "kind": "tensor", )"
      R"("dtype": "f16", "rank": 2, "shape": [4, 5], "padded_dim": 16, "row_pitch_bytes": 32}], )"
      R"("shards": [{"file": "shard-00000.gcs", "rows": 4, "first_row": 0, "bytes": 8192, )"
      R"("header_hash": "0123456789abcdef"}], "inputs": [{"path": "a.npy", "bytes": 10, )"
      R"("xxh3": "0123456789abcdef"}], "options": {}})";
  if (find.empty()) return text;
  const auto at = text.find(find);
  REQUIRE(at != std::string::npos);
  return text.replace(at, find.size(), replace);
}

}  // namespace

TEST_CASE("fuzz finding: a manifest number beyond a double is a gpucache::Error") {
  // Found by fuzz_manifest in 1 s: nlohmann::json throws out_of_range (406), not parse_error, for
  // "161e308"; it escaped parse_manifest as a foreign exception.
  CHECK_THROWS_WITH_AS(parse(regression_text("manifest/number-overflow-1e308.json")),
                       doctest::Contains("manifest is not valid JSON"), Error);
  CHECK_THROWS_WITH_AS(parse(manifest_with(R"("rows": 4)", R"("rows": 1e400)")),
                       doctest::Contains("not valid JSON"), Error);
}

TEST_CASE("manifest fields of the wrong JSON type are refused with their key, never converted") {
  CHECK_NOTHROW(parse(manifest_with("", "")));
  struct Case {
    const char* find;
    const char* replace;
    const char* where;
  };
  // Floats used to go through get<uint64_t>(), a float-to-integer conversion with undefined
  // behaviour when out of range; negative numbers wrapped around; wrong types threw nlohmann's
  // type_error.
  const Case cases[] = {
      {R"("rows": 4)", R"("rows": 1e300)", "rows"},
      {R"("rows": 4)", R"("rows": -1)", "rows"},
      {R"("rows": 4)", R"("rows": "4")", "rows"},
      {R"("format_version": 1)", R"("format_version": 1.5)", "format_version"},
      {R"("format": "gpucache-dataset")", R"("format": 7)", "format"},
      {R"("rank": 2)", R"("rank": 258)", "columns[0].rank"},
      {R"("shape": [4, 5])", R"("shape": [4, 5.5])", "columns[0].shape[1]"},
      {R"("shape": [4, 5])", R"("shape": [3, 5])", "columns[0].shape"},
      {R"("shape": [4, 5])", R"("shape": [4])", "columns[0].shape"},
      {R"("shape": [4, 5])", R"("shape": {})", "columns[0].shape"},
      {R"("kind": "tensor")", R"("kind": "image")", "columns[0].kind"},
      {R"("padded_dim": 16)", R"("padded_dim": null)", "columns[0].padded_dim"},
      {R"("columns": [)", R"("columns": 3, "x": [)", "columns"},
      {R"("shards": [{)", R"("shards": [7, {)", "shards[0]"},
      {R"("bytes": 8192)", R"("bytes": 1e20)", "shards[0].bytes"},
      {R"(, "header_hash": "0123456789abcdef"}], "inputs")", R"(}], "inputs")", "shards[0]"},
      {R"("inputs": [{)", R"("inputs": ["a.npy", {)", "inputs[0]"},
      {R"("path": "a.npy")", R"("path": ["a.npy"])", "inputs[0].path"},
      {R"("bytes": 10)", R"("bytes": -10)", "inputs[0].bytes"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.replace);
    try {
      parse(manifest_with(c.find, c.replace));
      FAIL("accepted");
    } catch (const Error& error) {
      CHECK(error.file() == "manifest.json");
      CHECK(error.location() == c.where);
    }
  }
  // A tool section of the wrong type is only provenance: ignored, not fatal.
  CHECK(parse(manifest_with(R"({"name": "gpucache", "version": "0.1.0"})", "[]")).tool_version ==
        "");
}

TEST_CASE("fuzz finding: an npy shape whose element count overflows 64 bits is refused") {
  // Found by fuzz_npy against the first .npy parser: strides were multiplied in signed 64-bit
  // arithmetic (UBSan: 4 * 9223372036854775807 overflows). The .npy parser that replaced it
  // checks every product.
  const auto bytes =
      test_support::read_bytes((kRegressions / "npy/stride-overflow-int64.npy").string());
  REQUIRE(bytes.size() > 128);
  CHECK_THROWS_AS(parse_npy(std::as_bytes(std::span(bytes.data(), bytes.size())), nullptr, "x.npy"),
                  Error);
}

TEST_CASE("fuzz finding: a later minor version's reserved header bytes are ignored, by design") {
  // shard_layout found a header that decodes but does not re-encode to the same bytes: version
  // 1.0xf501 with non-zero bytes at 181-186. SPEC.md lets a later minor version use reserved
  // header bytes 140-247, which a reader of an older minor ignores; the target's canonical-bytes
  // invariant now holds for the minor versions this reader knows, and for later ones outside
  // those bytes. Found after about 4.8 million executions of the second long round.
  const auto raw = test_support::read_bytes(
      (kRegressions / "shard_layout" / "later-minor-reserved-bytes.gcs").string());
  std::vector<std::byte> input(raw.size());
  std::memcpy(input.data(), raw.data(), raw.size());
  const std::vector<std::byte> image = fuzz::rehashed_shard_image(input);
  REQUIRE_FALSE(image.empty());
  const shard::Layout layout = shard::decode_layout(image, "later.gcs");
  CHECK(layout.header.version_minor > shard::kVersionMinor);
  const auto encoded = shard::encode_header(layout.header);
  CHECK(std::memcmp(encoded.data(), image.data(), 140) == 0);
  CHECK(std::memcmp(encoded.data() + 140, image.data() + 140, 108) != 0);
  fuzz::shard_layout(input);  // no trap

  // The same bytes in a header of the current minor version are refused.
  std::vector<std::byte> current = image;
  const std::uint16_t minor = shard::kVersionMinor;
  std::memcpy(current.data() + 10, &minor, 2);
  current = fuzz::rehashed_shard_image(current);
  CHECK_THROWS_AS(shard::decode_layout(current, "current.gcs"), Error);
}

TEST_CASE("fuzz finding: a JSON-lines sequence column has no fixed dim, and reads row by row") {
  // jsonl found that its target still required every non-text column to have a dim() above 0:
  // since issue #14 a key whose arrays hold only integers maps to a sequence column (dim() 0,
  // rows read through row_length and read_sequence), here under a key with a byte-order mark and
  // brackets in it. The reader and the mapping were right; the target now reads sequences.
  const std::string path = (kRegressions / "jsonl" / "sequence-under-odd-key.jsonl").string();
  const SourceMapping mapping = map_source(read_jsonl(path), path, std::nullopt, {});
  REQUIRE(mapping.columns.size() == 1);
  const InputColumn& column = mapping.columns[0];
  CHECK(column.kind == ColumnKind::sequence);
  CHECK(column.dtype == DType::i64);
  CHECK(column.dim() == 0);
  REQUIRE(column.row_length(0) == 2);
  std::vector<std::int64_t> values(2);
  column.read_sequence(0, std::as_writable_bytes(std::span(values)));
  CHECK(values == std::vector<std::int64_t>{1, 2});
  std::vector<std::byte> input(test_support::read_bytes(path).size());
  const auto raw = test_support::read_bytes(path);
  std::memcpy(input.data(), raw.data(), raw.size());
  fuzz::jsonl(input);  // no trap
}

TEST_CASE("fuzz finding: a string array of no strings under huge dimensions is refused at once") {
  // npy found a 131-byte file, '<S7' of shape (3, 12, 2372085, 758, 0), that ran past libFuzzer's
  // 10 s and 2 GB: string arrays are read as nested lists of str, and the levels above the zero
  // dimension were 6.5e10 empty lists. Such a skeleton is now refused beyond rank × strings +
  // 65,536 lists (src/inputs/npy/FORMAT.md, "Strictness"); small ones still read.
  const auto bytes =
      test_support::read_bytes((kRegressions / "npy/empty-string-skeleton.npy").string());
  try {
    (void)parse_npy(std::as_bytes(std::span(bytes.data(), bytes.size())), nullptr, "x.npy");
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(std::string(error.what()).find("(3, 12, 2372085, 758, 0)") != std::string::npos);
    CHECK(std::string(error.what()).find("nested lists") != std::string::npos);
  }
  auto npy = [](const std::string& shape) {
    std::string header = "{'descr': '|S2', 'fortran_order': False, 'shape': " + shape + ", }";
    header.resize(118, ' ');
    header += '\n';
    return std::string("\x93NUMPY\x01\x00\x76\x00", 10) + header;
  };
  const std::string small = npy("(2, 3, 0)");
  const Value value = parse_npy(std::as_bytes(std::span(small.data(), small.size())), nullptr, "s");
  REQUIRE(value.as_list() != nullptr);
  CHECK(value.as_list()->items.size() == 2);
  const std::string large = npy("(100000, 0)");
  CHECK_THROWS_AS(parse_npy(std::as_bytes(std::span(large.data(), large.size())), nullptr, "l"),
                  Error);
}

TEST_CASE("fuzz finding: a Parquet list column's empty row reads into a buffer of no storage") {
  // parquet found on its first seed (lists.parquet, kept as empty-sequence-row.parquet): a
  // sequence row of no values was read with memcpy from the joined values into the caller's empty
  // span, whose data() is null (UBSan: null passed as a nonnull argument). Pack hands over such
  // spans too, for a block whose rows are all empty. read_sequence now copies nothing then.
  if (!parquet_built()) return;
  const std::string path = (kRegressions / "parquet" / "empty-sequence-row.parquet").string();
  const InputData data = read_input(path);
  bool read_empty_row = false;
  for (const auto& column : data.columns) {
    if (column.kind != ColumnKind::sequence) continue;
    for (std::uint64_t row = 0; row < column.rows; ++row)
      if (column.row_length(row) == 0) {
        column.read_sequence(row, {});
        read_empty_row = true;
      }
  }
  CHECK(read_empty_row);
  fuzz::parquet(regression_bytes("parquet/empty-sequence-row.parquet"));  // no trap
}

TEST_CASE("fuzz finding: a Parquet dictionary page of no values") {
  // parquet found a file whose float column's dictionary page claims 0 values (after 133,445
  // executions): the empty dictionary has no buffer, and converting its 0 values passed a null
  // destination to memcpy (UBSan). The file is refused further on, by its dictionary-encoded pages.
  if (!parquet_built()) return;
  CHECK(parquet_refusal("empty-dictionary.parquet").find("is past its") != std::string::npos);
  fuzz::parquet(regression_bytes("parquet/empty-dictionary.parquet"));  // no trap
  // Hand-reduced (one int32 column, 3 rows): an empty dictionary followed by a PLAIN page reads;
  // followed by a dictionary-encoded page, index 0 is past the dictionary's 0 entries.
  const InputData plain =
      read_input((kRegressions / "parquet" / "empty-dictionary-plain-page.parquet").string());
  REQUIRE(plain.columns.size() == 1);
  std::vector<std::int32_t> values(3);
  read_rows_as(plain.columns[0], 0, 3, DType::i32, std::as_writable_bytes(std::span(values)));
  CHECK(values == std::vector<std::int32_t>{1, 2, 3});
  CHECK(parquet_refusal("empty-dictionary-indexed-page.parquet")
            .find("a dictionary index (0) is past its 0 entries") != std::string::npos);
}

TEST_CASE("Parquet claims beyond the decoded-size cap are refused before anything is allocated") {
  // Found by review while fixing the parquet findings, each a file of about 100 bytes that made the
  // reader allocate far beyond the chunk's cap (max(1 GiB, 1024 x its bytes)), which bounded the
  // values buffer only: a text column's 2^31 - 1 dictionary indices (8 GiB) and offsets (16 GiB);
  // an int8 column's 2^30 - 1 indices (4 GiB, its values 1 GiB); a snappy page claiming 2 GiB
  // decompressed. Every buffer a claim in the file sizes is now checked against the cap first: 8
  // bytes per value (src/inputs/parquet/FORMAT.md), the values, a decompressed page.
  if (!parquet_built()) return;
  CHECK(parquet_refusal("claim-text-offsets-16gib.parquet")
            .find("claims 2147483647 values, far more than its bytes can hold") !=
        std::string::npos);
  CHECK(parquet_refusal("claim-page-indices-4gib.parquet")
            .find("claims 1073741823 values, far more than its bytes can hold") !=
        std::string::npos);
  CHECK(
      parquet_refusal("claim-page-bytes-2gib.parquet")
          .find("a page claims 2147483647 bytes decompressed, far more than its bytes can hold") !=
      std::string::npos);
}
