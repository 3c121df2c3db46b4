// Round 2 of hostile inputs (issue #18, docs/reliability.md): each TEST_CASE holds one class of
// inputs that the reference libraries open, or refuse, at once, and checks that gpucache neither
// hangs, parses in quadratic time, inflates what it only probes, accepts what the reference
// refuses, nor prints more than one error line. Inputs are generated here, or are the small files
// scripts/fixtures/hostile_fixtures.py wrote with real numpy and torch 1.13 (tests/data/hostile).
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "gpucache/error.hpp"
#include "gpucache/input.hpp"
#include "gpucache/jsonl.hpp"
#include "gpucache/probe.hpp"
#include "gpucache/safetensors.hpp"
#include "test_support.hpp"
#include "zip/zip.hpp"

using namespace gpucache;
using test_support::data_path;
using test_support::run_cli;
using test_support::ScratchDir;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void write_text(const std::string& path, const std::string& bytes) {
  test_support::write_bytes(path, std::vector<char>(bytes.begin(), bytes.end()));
}

// A safetensors file: the 8-byte length, `header` as given, then `data`.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  std::uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string error_of(auto&& read) {
  try {
    read();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// stderr of a failed CLI run is exactly one line.
void check_one_line(const test_support::RunResult& result) {
  CAPTURE(result.err);
  CHECK(result.exit_code == 2);
  REQUIRE(!result.err.empty());
  CHECK(result.err.back() == '\n');
  CHECK(result.err.find('\n') == result.err.size() - 1);
}

}  // namespace

TEST_CASE("a safetensors header of 200,000 tensors is read and probed in linear time") {
  // A quadratic parse (an insertion-ordered JSON object) took 17 s for 100,000 entries, so would
  // take over a minute here; reading and probing take about 2.5 s in a release build. The bound
  // is generous for sanitizer builds and a loaded CI machine.
  constexpr std::size_t kTensors = 200'000;
  std::string header = "{";
  header.reserve(kTensors * 64);
  for (std::size_t i = 0; i < kTensors; ++i) {
    header += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":{\"dtype\":\"U8\",\"shape\":[1]," +
              "\"data_offsets\":[" + std::to_string(i) + "," + std::to_string(i + 1) + "]}";
  }
  header += "}";
  ScratchDir scratch;
  const std::string path = scratch / "many.safetensors";
  write_text(path, safetensors_bytes(header, std::string(kTensors, '\x07')));

  const auto start = Clock::now();
  const Value root = read_safetensors(path);
  REQUIRE(root.as_dict() != nullptr);
  CHECK(root.as_dict()->items.size() == kTensors);
  CHECK(root.as_dict()->find("t199999") != nullptr);
  const std::string probed = probe_text(read_input(path, {.tensor_data = false}), path);
  CHECK(!probed.empty());
  CHECK(seconds_since(start) < 30.0);
}

TEST_CASE("safetensors: around the header's object only JSON whitespace, as the reference") {
  // Verdicts of huggingface's safetensors 0.8 (load and safe_open) on the same bytes.
  const std::string object = R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  struct Case {
    std::string header;
    bool accepted;
    std::string error;
  };
  const std::vector<Case> cases{
      {object, true, ""},
      {object + "    ", true, ""},
      {object + "\n", true, ""},
      {object + "\t\r", true, ""},
      {" \n\t" + object, true, ""},
      {"\xEF\xBB\xBF" + object, false, "a UTF-8 byte-order mark"},
      {object + std::string(3, '\0'), false, "holds a NUL byte"},
      {object + std::string(1, '\0') + "garbage", false, "holds a NUL byte"},
      {std::string(1, '\0') + object, false, "must be a JSON object"},
      {object + "x", false, "is not valid JSON"},
      {object + "{}", false, "is not valid JSON"},
      {R"({"__metadata__":{"k":"\xff"},"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
       false, "is not valid JSON"},
  };
  ScratchDir scratch;
  for (const auto& c : cases) {
    CAPTURE(c.header);
    const std::string path = scratch / "near_miss.safetensors";
    write_text(path, safetensors_bytes(c.header, "\x01\x02"));
    const std::string error = error_of([&] { (void)read_safetensors(path); });
    if (c.accepted) {
      CHECK(error == "(no error)");
    } else {
      CHECK(contains(error, c.error));
      CHECK(error.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("JSON lines: nothing but whitespace may follow a line's object") {
  // As Python's json.loads, which numpy-free JSON-lines readers use: trailing whitespace is fine,
  // anything else (a NUL and garbage included) is refused.
  struct Case {
    std::string line;
    bool accepted;
  };
  const std::vector<Case> cases{
      {R"({"e": [1.5, 2]} )", true},
      {"{\"e\": [1.5, 2]}\t", true},
      {R"({"e": [1.5, 2]} x)", false},
      {R"({"e": [1.5, 2]}{"e": [1]})", false},
      {std::string(R"({"e": [1.5, 2]})") + '\0' + "garbage", false},
      {std::string(R"({"e": [1.5, 2]})") + '\0', false},
      {"\xEF\xBB\xBF{\"e\": [1.5]}", false},  // a byte-order mark on a line after the first
  };
  ScratchDir scratch;
  for (const auto& c : cases) {
    CAPTURE(c.line);
    const std::string path = scratch / "near_miss.jsonl";
    write_text(path, "{\"e\": [0.5, 1]}\n" + c.line + "\n");
    const std::string error = error_of([&] { (void)read_jsonl(path); });
    if (c.accepted) {
      CHECK(error == "(no error)");
    } else {
      CHECK(contains(error, "line 2"));
      CHECK(error.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("JSON lines: a key whose arrays hold only integer literals is i64 in every row") {
  ScratchDir scratch;
  const std::string path = scratch / "ids.jsonl";
  write_text(path,
             "{\"ids\": [101, 9007199254740993, -2], \"e\": [1, 2.5]}\n"
             "{\"ids\": [], \"e\": [1e0, 2]}\n");
  const Value root = read_jsonl(path);
  const auto& rows = root.as_list()->items;
  REQUIRE(rows.size() == 2);
  const Tensor* ids = rows[0].as_dict()->find("ids")->as_tensor();
  REQUIRE(ids != nullptr);
  CHECK(ids->dtype == DType::i64);
  std::vector<std::int64_t> values(3);
  ids->copy_row_major(0, std::as_writable_bytes(std::span(values)));
  // 2^53 + 1 survives exactly: it never passed through a float.
  CHECK(values == std::vector<std::int64_t>{101, 9007199254740993, -2});
  CHECK(rows[0].as_dict()->find("e")->as_tensor()->dtype == DType::f32);
  // [1e0, 2] alone would be f32 (1e0 is not an integer literal); [1, 2] would be i64 alone, but
  // "e" has a fraction in row 0, so it is f32 in every row.
  CHECK(rows[1].as_dict()->find("e")->as_tensor()->dtype == DType::f32);
  // An empty array takes its column's dtype: every row of "ids" is i64.
  CHECK(rows[1].as_dict()->find("ids")->as_tensor()->dtype == DType::i64);
}

TEST_CASE("probe reads a deflate bomb's header, not its data") {
  // 64 MiB of zeros deflated to 64 KB (the ratio a real bomb uses, at a size a test can afford).
  for (const char* fixture : {"hostile/deflate_bomb.npz", "hostile/deflate_bomb.pt"}) {
    CAPTURE(fixture);
    const std::uint64_t before = detail::ZipArchive::inflated_bytes_total();
    const InputData probed = read_input(data_path(fixture), {.tensor_data = false});
    const std::uint64_t inflated = detail::ZipArchive::inflated_bytes_total() - before;
    CHECK(inflated < 4096);
    const Dict* dict = probed.tree.as_dict();
    REQUIRE(dict != nullptr);
    REQUIRE(dict->items.size() == 1);
    const Tensor* tensor = dict->items[0].second.as_tensor();
    REQUIRE(tensor != nullptr);
    CHECK(tensor->shape == std::vector<std::int64_t>{1 << 24});
    CHECK(tensor->dtype == DType::f32);
    CHECK(!tensor->has_data());
    std::vector<std::byte> one(4);
    CHECK(contains(error_of([&] { tensor->copy_row_major(0, one); }), "data was not read"));

    // A full read inflates it, once, and checks its CRC-32.
    const std::uint64_t before_full = detail::ZipArchive::inflated_bytes_total();
    const InputData full = read_input(data_path(fixture));
    const std::uint64_t inflated_full = detail::ZipArchive::inflated_bytes_total() - before_full;
    CHECK(inflated_full >= std::uint64_t{64} << 20);           // the data ...
    CHECK(inflated_full <= (std::uint64_t{64} << 20) + 4096);  // ... and an .npy header
    CHECK(full.tree.as_dict()->items[0].second.as_tensor()->has_data());

    const auto result = run_cli({"probe", data_path(fixture)});
    CAPTURE(result.err);
    CHECK(result.exit_code == 0);
    CHECK(contains(result.out, "16777216"));
  }
}

TEST_CASE("a torch view repeating one row 2^40 times is refused at once, in one line") {
  for (const char* fixture : {"hostile/expand_huge.pt", "hostile/strided_huge.pt"}) {
    CAPTURE(fixture);
    const auto start = Clock::now();
    const std::string error = error_of([&] { (void)read_input(data_path(fixture)); });
    CHECK(seconds_since(start) < 1.0);
    CHECK(contains(error, "tensor [1099511627776, 256] f32: is a view that repeats"));
    CHECK(contains(error, "stride 0 in dimension 0"));
    ScratchDir scratch;
    const auto packed = run_cli({"pack", data_path(fixture), "-o", scratch / "out"});
    check_one_line(packed);
    CHECK(contains(packed.err, "stride 0 in dimension 0"));
  }
}

TEST_CASE("a small repeating view is read like any tensor and packs") {
  const InputData data = read_input(data_path("hostile/expand_small.pt"));
  const Tensor* tensor = data.tree.as_dict()->find("embedding")->as_tensor();
  REQUIRE(tensor != nullptr);
  CHECK(tensor->strides == std::vector<std::int64_t>{0, 1});
  std::vector<float> values(40);
  tensor->copy_row_major(0, std::as_writable_bytes(std::span(values)));
  for (std::size_t i = 0; i < values.size(); ++i) CHECK(values[i] == static_cast<float>(i % 8));
  ScratchDir scratch;
  const auto packed =
      run_cli({"pack", data_path("hostile/expand_small.pt"), "-o", scratch / "out", "-q"});
  CAPTURE(packed.err);
  CHECK(packed.exit_code == 0);
}

TEST_CASE("an ambiguous layout is refused in one line that lists the choices") {
  ScratchDir scratch;
  const auto packed = run_cli({"pack", data_path("hostile/two_blocks.npz"), "-o", scratch / "out"});
  check_one_line(packed);
  CHECK(contains(packed.err, "--field"));
  CHECK(contains(packed.err, " | "));
}

TEST_CASE("every CLI error is one line, whatever the input's names hold") {
  // A tensor name with line breaks and a megabyte of text: the message escapes and shortens it.
  const std::string header = "{\"" + std::string("bad\\nname\\r\\u001b[31m") +
                             std::string(1 << 20, 'n') +
                             R"(":{"dtype":"Q8","shape":[1],"data_offsets":[0,1]}})";
  ScratchDir scratch;
  const std::string path = scratch / "names.safetensors";
  write_text(path, safetensors_bytes(header, "\x01"));
  const auto result = run_cli({"probe", path});
  check_one_line(result);
  CHECK(result.err.size() < 8192);
  CHECK(contains(result.err, "bad\\nname\\r\\x1b[31m"));
  CHECK(contains(result.err, "(1048590 bytes)"));
}
