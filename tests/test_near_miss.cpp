// Strictness equal to the reference implementations (issue #18 item 4): for each format, a set
// of near-miss files (tests/data/near_miss/FORMAT/) and the verdict the reference library itself
// gave on each (verdicts.json, written by scripts/fixtures/near_miss_fixtures.py: numpy's np.load
// with allow_pickle=False, Python's zipfile + np.load for .npz, torch.load with
// weights_only=True). gpucache must accept exactly what the reference accepts, read the values
// it read, and refuse the rest with one gpucache::Error line. The few deliberate differences are
// listed below with their reason, and in the format's FORMAT.md ("Strictness").
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "expected_tree.hpp"
#include "gpucache/error.hpp"
#include "gpucache/npy.hpp"
#include "gpucache/npz.hpp"
#include "gpucache/pt.hpp"
#include "test_support.hpp"

using namespace gpucache;
using test_support::data_path;

namespace {

// Files where gpucache deliberately decides otherwise than the reference, and why. The test
// checks that the difference is still exactly the documented one.
const std::map<std::string, std::string> kDeliberate = {
    {"npy/structured.npy",
     "numpy reads structured dtypes; gpucache has no record type (npy/FORMAT.md: refused dtypes)"},
    {"npy/complex.npy", "numpy reads complex64; gpucache has no complex element type"},
    {"npy/shape_negative.npy",
     "numpy's fromfile reads every element for a count of -1 and reshapes to (-1,); a negative "
     "dimension is not a shape, gpucache refuses it"},
    {"npy/descr_escape.npy",
     "Python decodes '<f\\x34' to '<f4'; no writer escapes, gpucache refuses escapes rather than "
     "decode them"},
    {"zip/bzip2.npz",
     "zipfile inflates bzip2 (method 12); numpy and torch write only stored and deflated members, "
     "gpucache reads only those two"},
    {"zip/lzma.npz", "as bzip2: LZMA (method 14) is not read"},
    {"zip/duplicate_names.npz",
     "zipfile takes the last of two members of one name, torch's reader another: gpucache refuses "
     "the ambiguous archive"},
    {"zip/entry_count_high.npz",
     "zipfile reads entries until the directory size is used up and ignores the count, torch's "
     "reader counts them: gpucache refuses a count and size that disagree"},
    {"zip/entry_count_low.npz", "as entry_count_high"},
    {"zip/multi_disk.npz",
     "zipfile ignores the disk numbers of a plain end record; gpucache refuses a split archive "
     "rather than read its offsets as if they were all in this file"},
    {"zip/prepended_zip_local.npz",
     "zipfile shifts every offset by the bytes prepended before the archive; gpucache (like "
     "torch's reader) reads offsets as written and refuses the gap"},
    {"pt/protocol_4.pt",
     "torch's weights_only unpickler lacks the FRAME opcode of protocols 4 and 5 (it says so in "
     "a warning); gpucache reads them, with the values torch.load reads without weights_only"},
    {"pt/protocol_5.pt", "as protocol_4"},
    {"pt/handmade_protocol_4.pt", "as protocol_4"},
    {"pt/device_value.pt",
     "gpucache's allowlist is the part of torch's that holds tensors and plain data: "
     "torch.device, set, complex and bytearray are refused by name (never called)"},
    {"pt/set_value.pt", "as device_value"},
    {"pt/complex_value.pt", "as device_value"},
    {"pt/bytearray_value.pt", "as device_value"},
};

nlohmann::json load_verdicts(const std::string& format) {
  std::ifstream in(data_path("near_miss/" + format + "/verdicts.json"));
  REQUIRE_MESSAGE(in.good(), "missing verdicts.json for " << format);
  return nlohmann::json::parse(in);
}

void check_set(const std::string& format, const std::function<Value(const std::string&)>& read) {
  const auto verdicts = load_verdicts(format);
  REQUIRE(verdicts.size() >= 15);
  std::size_t differences = 0;
  for (const auto& [name, verdict] : verdicts.items()) {
    const std::string key = format + "/" + name;
    const bool reference_accepts = verdict["accepted"].get<bool>();
    const std::string reference_error = verdict.value("reference_error", std::string());
    CAPTURE(key);
    CAPTURE(reference_error);
    const auto deliberate = kDeliberate.find(key);
    const bool want_accepted =
        deliberate == kDeliberate.end() ? reference_accepts : !reference_accepts;
    if (deliberate != kDeliberate.end()) ++differences;

    std::string error;
    bool accepted = false;
    Value value;
    try {
      value = read(data_path("near_miss/" + key));
      accepted = true;
    } catch (const Error& e) {
      error = e.what();
    } catch (const std::exception& e) {
      FAIL_CHECK("not a gpucache::Error: " << e.what());
      continue;
    }
    CAPTURE(error);
    CHECK(accepted == want_accepted);
    if (!accepted) {
      CHECK(!error.empty());
      CHECK(error.find('\n') == std::string::npos);
    } else if (reference_accepts && verdict.contains("value")) {
      expected_tree::check_value(value, verdict["value"]);
    } else if (verdict.contains("value_without_weights_only")) {
      // Refused by the reference for a limitation, not a danger: the value the same library
      // reads without that restriction (written only for files the generator made itself).
      expected_tree::check_value(value, verdict["value_without_weights_only"]);
    }
  }
  // Every listed difference of this format names a file of its set.
  std::size_t listed = 0;
  for (const auto& [key, reason] : kDeliberate)
    if (key.starts_with(format + "/")) ++listed;
  CHECK(differences == listed);
}

}  // namespace

TEST_CASE("npy near misses: gpucache accepts what np.load(allow_pickle=False) accepts") {
  check_set("npy", [](const std::string& path) { return read_npy(path); });
}

TEST_CASE("zip near misses: gpucache accepts what zipfile and np.load accept in an .npz") {
  check_set("zip", [](const std::string& path) { return read_npz(path); });
}

TEST_CASE("pt near misses: gpucache accepts what torch.load(weights_only=True) accepts") {
  check_set("pt", [](const std::string& path) { return read_pt(path); });
}
