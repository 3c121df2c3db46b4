#include <doctest/doctest.h>

#include <array>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include "gpucache/error.hpp"
#include "gpucache/input.hpp"
#include "test_support.hpp"

using namespace gpucache;
namespace fs = std::filesystem;
using test_support::data_path;
using test_support::ScratchDir;

namespace {

std::string zip_head(const std::string& first_entry) {
  std::string head("PK\x03\x04", 4);
  head += std::string(22, '\0');
  head += static_cast<char>(first_entry.size());
  head += '\0';
  head += std::string(2, '\0');
  return head + first_entry;
}

std::string name_of(const InputFormat* format) {
  return format ? std::string(format->name) : std::string("(none)");
}

std::vector<std::string> extensions_of(const InputFormat& format) {
  std::vector<std::string> out;
  std::string word;
  for (char c : std::string(format.extensions) + ' ') {
    if (c != ' ') {
      word += c;
    } else if (!word.empty()) {
      out.push_back(word);
      word.clear();
    }
  }
  return out;
}

// A committed file of every format in the registry, to be recognised by its first bytes alone.
const std::map<std::string, std::vector<std::string>> kSamples{
    {"npy", {"npy/f32_c.npy"}},
    {"npz", {"npz/stored.npz", "npz/deflated.npz"}},
    {"pt", {"pt/embeddings.pt", "pt/legacy.pt"}},
    {"safetensors", {"safetensors/multi.safetensors"}},
    {"hdf5", {"hdf5/ann.h5"}},
    {"parquet", {"parquet/plain.parquet", "parquet/page_v2.parquet"}},
    {"jsonl", {"jsonl/dialogue.jsonl"}},
};

// A test-only format left out of the build, as HDF5 is without libhdf5.
bool sniff_fake_hdf5(std::string_view head, std::uint64_t) noexcept {
  return head.starts_with("\x89HDF");
}

struct ReaderCall {
  std::string path;
  unsigned threads = 0;
  int count = 0;
};
ReaderCall last_call;

Value recording_reader(const std::string& path, const ReadOptions& options) {
  last_call.path = path;
  last_call.threads = options.threads;
  ++last_call.count;
  return Value(std::string("read by the test reader"));
}

bool sniff_anything(std::string_view head, std::uint64_t) noexcept {
  return !head.empty();
}

constexpr std::array kTestFormats{
    InputFormat{.name = "fake",
                .title = "a test format that is built",
                .extensions = "fake",
                .sniff = sniff_anything,
                .read = read_tree<recording_reader>},
    InputFormat{.name = "hdf5",
                .title = "HDF5 files",
                .extensions = "h5 hdf5",
                .sniff = sniff_fake_hdf5,
                .read = nullptr,
                .build_hint = "-DGPUCACHE_HDF5=ON and libhdf5-dev"},
    InputFormat{.name = "also",
                .title = "a second built format, by extension only",
                .extensions = "also fk2",
                .read = read_tree<recording_reader>},
};

}  // namespace

TEST_CASE("every extension of every format picks it, in any case") {
  std::set<std::string> seen;
  for (const auto& format : input_formats()) {
    CAPTURE(format.name);
    CHECK(!extensions_of(format).empty());
    for (const auto& extension : extensions_of(format)) {
      CHECK_MESSAGE(seen.insert(extension).second, "extension claimed twice: " << extension);
      std::string upper = extension;
      for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      CHECK(format_from_extension("dir/file." + extension) == &format);
      CHECK(format_from_extension("a.b/FILE." + upper) == &format);
    }
    CHECK(find_input_format(format.name) == &format);
  }
  CHECK(find_input_format("nope") == nullptr);
}

TEST_CASE("the extensions are today's") {
  const std::map<std::string, std::string> expected{
      {"a/b/model.PT", "pt"},
      {"x.pth", "pt"},
      {"pytorch_model.bin", "pt"},
      {"m.safetensors", "safetensors"},
      {"a.npy", "npy"},
      {"a.npz", "npz"},
      {"d.jsonl", "jsonl"},
      {"d.json", "jsonl"},
      {"d.ndjson", "jsonl"},
      {"ann.hdf5", "hdf5"},
      {"x.H5", "hdf5"},
      {"old.hdf", "hdf5"},
      {"train-00000-of-00004.parquet", "parquet"},
      {"x.PQ", "parquet"},
      {"dir.pt/data", "(none)"},
      {"noext", "(none)"},
      {".pt", "(none)"},  // a hidden file named ".pt" has no extension
      {"a.pt.gz", "(none)"},
  };
  for (const auto& [path, name] : expected) {
    CAPTURE(path);
    CHECK(name_of(format_from_extension(path)) == name);
  }
}

TEST_CASE("every format is recognised by its first bytes alone") {
  ScratchDir scratch;
  for (const auto& format : input_formats()) {
    CAPTURE(format.name);
    if (!format.sniff) continue;  // by extension only
    const auto samples = kSamples.find(std::string(format.name));
    REQUIRE_MESSAGE(samples != kSamples.end(), "add a sample file of this format to kSamples");
    for (const auto& sample : samples->second) {
      CAPTURE(sample);
      const std::string copy = scratch / ("no_extension_" + std::string(format.name));
      fs::copy_file(data_path(sample), copy, fs::copy_options::overwrite_existing);
      CHECK(format_from_extension(copy) == nullptr);
      CHECK(detect_input_format(copy).name == format.name);
      // And read by that format's reader (a build without it refuses it in one line).
      if (format.built())
        CHECK_NOTHROW(read_input(copy, ReadOptions{1}));
      else
        CHECK_THROWS_WITH_AS(read_input(copy, ReadOptions{1}),
                             doctest::Contains("input was not built into this gpucache"), Error);
    }
  }
}

TEST_CASE("magic bytes follow today's rules and precedence") {
  const std::vector<std::pair<std::string, std::string>> heads{
      {"\x93NUMPY\x01\x00", "npy"},
      {zip_head("arr_0.npy"), "npz"},
      {zip_head("archive/data.pkl"), "pt"},
      {zip_head("x.npz"), "pt"},  // only a first member named *.npy makes a zip an npz
      {zip_head(".npy"), "npz"},
      {zip_head("npy"), "pt"},
      {std::string("PK\x03\x04", 4), "(none)"},  // too short for a local header
      {"\x80\x02\x8a\x0a", "pt"},
      // A pickle's PROTO byte wins over a safetensors-looking header length.
      {std::string("\x80\0\0\0\0\0\0\0{}", 10), "pt"},
      {std::string("\x02\0\0\0\0\0\0\0{}", 10), "safetensors"},
      // A header length past the end of the file is not safetensors.
      {std::string("\xff\0\0\0\0\0\0\0{}", 10), "(none)"},
      // '{' and seven zero bytes: a header length of 123, past the end of a 10-byte file.
      {std::string("{\0\0\0\0\0\0\0{}", 10), "jsonl"},
      {"  {\"text\": 1}\n", "jsonl"},
      {"\r\n\t{}", "jsonl"},
      {"hello", "(none)"},
      {"", "(none)"},
  };
  for (const auto& [head, name] : heads) {
    CAPTURE(head);
    CHECK(name_of(format_from_magic(head, head.size())) == name);
  }
  // Once the file is long enough it is both, and safetensors comes first.
  const std::string both("{\0\0\0\0\0\0\0{}", 10);
  CHECK(name_of(format_from_magic(both, 131)) == "safetensors");
}

TEST_CASE("the first matching sniff in table order wins") {
  // Both fake formats accept "\x89HDF..."; the table lists "fake" first.
  CHECK(name_of(format_from_magic("\x89HDF\r\n", 6, kTestFormats)) == "fake");
  const std::span<const InputFormat> without_first(kTestFormats.data() + 1, 2);
  CHECK(name_of(format_from_magic("\x89HDF\r\n", 6, without_first)) == "hdf5");
  CHECK(name_of(format_from_magic("other", 5, without_first)) == "(none)");
}

TEST_CASE("read_input calls the detected format's reader with the caller's options") {
  ScratchDir scratch;
  const std::string by_extension = scratch / "data.FK2";
  test_support::write_bytes(by_extension, {'x'});
  last_call = {};
  const Value value = read_input(by_extension, ReadOptions{3}, kTestFormats).tree;
  CHECK(*value.as_string() == "read by the test reader");
  CHECK(last_call.count == 1);
  CHECK(last_call.path == by_extension);
  CHECK(last_call.threads == 3);
}

TEST_CASE("a format left out of the build is recognised and refused in one line") {
  ScratchDir scratch;
  const std::string expected_cause =
      "hdf5 input was not built into this gpucache (configure with -DGPUCACHE_HDF5=ON and "
      "libhdf5-dev)";
  // By extension, whatever the bytes.
  const std::string by_extension = scratch / "weights.H5";
  test_support::write_bytes(by_extension, {'{', '}'});
  CHECK(detect_input_format(by_extension, kTestFormats).name == "hdf5");
  CHECK(!detect_input_format(by_extension, kTestFormats).built());
  last_call = {};
  CHECK_THROWS_WITH_AS(read_input(by_extension, {}, kTestFormats),
                       (by_extension + ": " + expected_cause).c_str(), Error);
  // By magic, without an extension (the table without "fake", which accepts any bytes).
  const std::string by_magic = scratch / "weights";
  test_support::write_bytes(by_magic, {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'});
  const std::span<const InputFormat> without_first(kTestFormats.data() + 1, 2);
  CHECK_THROWS_WITH_AS(read_input(by_magic, {}, without_first),
                       (by_magic + ": " + expected_cause).c_str(), Error);
  CHECK(last_call.count == 0);

  // Help lists it as not built; the "supported" list leaves it out.
  const std::string help = input_formats_help(kTestFormats);
  CHECK(help ==
        "Input formats (by extension, else by the first bytes):\n"
        "  fake  .fake       a test format that is built\n"
        "  hdf5  .h5/.hdf5   HDF5 files (not built; configure with -DGPUCACHE_HDF5=ON and "
        "libhdf5-dev)\n"
        "  also  .also/.fk2  a second built format, by extension only");
  CHECK(supported_input_formats(kTestFormats) == "fake (.fake), also (.also/.fk2)");
}

TEST_CASE("the supported-formats text and the help come from the table") {
  ScratchDir scratch;
  const std::string unknown = scratch / "notes.txt";
  test_support::write_bytes(unknown, {'p', 'l', 'a', 'i', 'n'});
  const std::span<const InputFormat> without_first(kTestFormats.data() + 1, 2);
  CHECK_THROWS_WITH_AS(detect_input_format(unknown, without_first),
                       (unknown + ": cannot tell its format from the extension or the first bytes; "
                                  "supported: also (.also/.fk2)")
                           .c_str(),
                       Error);
  CHECK_THROWS_AS(detect_input_format("/nonexistent/file"), Error);

  // The real table: every built format is named, with each of its extensions, in table order.
  std::string expected;
  for (const auto& format : input_formats()) {
    if (!format.built()) continue;
    expected += (expected.empty() ? "" : ", ") + std::string(format.name) + " (";
    const auto extensions = extensions_of(format);
    for (std::size_t i = 0; i < extensions.size(); ++i)
      expected += (i ? "/." : ".") + extensions[i];
    expected += ")";
  }
  CHECK(supported_input_formats() == expected);
  CHECK(expected ==
        std::string("npy (.npy), npz (.npz), pt (.pt/.pth/.bin), safetensors (.safetensors), ") +
            (find_input_format("hdf5")->built() ? "hdf5 (.h5/.hdf5/.hdf), " : "") +
            (find_input_format("parquet")->built() ? "parquet (.parquet/.pq), " : "") +
            "jsonl (.jsonl/.ndjson/.json)");
  const std::string supported = "supported: " + expected;
  CHECK_THROWS_WITH(detect_input_format(unknown), doctest::Contains(supported.c_str()));

  const std::string help = input_formats_help();
  for (const auto& format : input_formats()) {
    CAPTURE(format.name);
    CHECK(help.find("\n  " + std::string(format.name) + " ") != std::string::npos);
    CHECK(help.find(std::string(format.title)) != std::string::npos);
  }
}

TEST_CASE("the CLI's help lists the formats of the table") {
  for (const char* command : {"pack", "probe"}) {
    CAPTURE(command);
    const auto result = test_support::run_cli({command, "--help"});
    CHECK(result.exit_code == 0);
    CHECK(result.out.find(input_formats_help()) != std::string::npos);
  }
}
