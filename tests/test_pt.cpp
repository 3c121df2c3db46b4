#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "expected_tree.hpp"
#include "gpucache/error.hpp"
#include "gpucache/pt.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(GPUCACHE_TEST_DATA) / "pt";
// The shared data folder sits beside the project root; GPUCACHE_SHARED_DATA in the environment
// overrides the compiled-in path (e.g. for a checkout that lives elsewhere).
const fs::path kTorch2 =
    fs::path(std::getenv("GPUCACHE_SHARED_DATA") ? std::getenv("GPUCACHE_SHARED_DATA")
                                                 : GPUCACHE_SHARED_DATA) /
    "torch2";
constexpr const char* kExecutedMarker = "/tmp/gpucache_pt_fixture_was_executed";

std::string error_of(const fs::path& path) {
  try {
    read_pt(path.string());
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

std::vector<char> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const fs::path& path, const std::vector<char>& bytes) {
  // A fresh file each time: truncating one in place makes ext4 flush it to disk (auto_da_alloc).
  fs::remove(path);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() /
         ("gpucache_test_pt_" + std::to_string(::getpid()) + "_" + name);
}

// The whole tree as text, tensors by their metadata and elements.
void describe(const Value& value, std::string& out) {
  if (const auto* dict = value.as_dict()) {
    out += "{";
    for (const auto& [key, item] : dict->items) {
      out += key + ":";
      describe(item, out);
      out += ",";
    }
    out += "}";
  } else if (const auto* list = value.as_list()) {
    out += list->is_tuple ? "(" : "[";
    for (const auto& item : list->items) {
      describe(item, out);
      out += ",";
    }
    out += list->is_tuple ? ")" : "]";
  } else if (const auto* tensor = value.as_tensor()) {
    out += "tensor " + std::string(dtype_name(tensor->dtype)) + shape_text(tensor->shape) +
           shape_text(tensor->strides) + "+" + std::to_string(tensor->storage_offset) +
           (tensor->big_endian ? " big" : "") + " storage of " +
           std::to_string(tensor->storage->bytes.size()) + " bytes";
    std::vector<std::byte> dense(tensor->nbytes());
    tensor->copy_row_major(0, dense);
    out += " = " + std::string(reinterpret_cast<const char*>(dense.data()), dense.size());
  } else if (const auto* text = value.as_string()) {
    out += "'" + *text + "'";
  } else if (const auto* number = value.as_int()) {
    out += std::to_string(*number);
  } else if (const auto* number = value.as_float()) {
    out += std::to_string(*number);
  } else {
    out += std::string(value.type_name());
  }
}

// The tree read with that many threads, or the error reading it threw.
std::string read_outcome(const fs::path& path, unsigned threads) {
  try {
    std::string out;
    describe(read_pt(path.string(), ReadOptions{threads}), out);
    return out;
  } catch (const Error& error) {
    return std::string("error: ") + error.what();
  }
}

const Tensor& tensor_at(const Value& root, const std::string& key) {
  const Value* value = root.as_dict()->find(key);
  REQUIRE(value != nullptr);
  REQUIRE(value->as_tensor() != nullptr);
  return *value->as_tensor();
}

// Reads every element of every tensor: after a successful load this must stay in bounds.
void touch_all(const Value& value) {
  if (const auto* dict = value.as_dict()) {
    for (const auto& [key, item] : dict->items) touch_all(item);
  } else if (const auto* list = value.as_list()) {
    for (const auto& item : list->items) touch_all(item);
  } else if (const auto* tensor = value.as_tensor()) {
    std::vector<std::byte> dense(tensor->nbytes());
    tensor->copy_row_major(0, dense);
  }
}

}  // namespace

TEST_CASE("every loadable .pt fixture matches what torch loaded") {
  std::set<std::string> checked;
  for (const auto& path : expected_tree::fixtures(kData, ".pt")) {
    const auto expected = expected_tree::load_expected(path);
    if (!expected.contains("value")) continue;
    INFO("fixture " << path.filename().string());
    expected_tree::check_value(read_pt(path.string()), expected["value"]);
    checked.insert(path.stem().string());
  }
  // The layouts this reader exists for must all be among them.
  for (const char* name :
       {"dtypes", "views", "parameter", "scalars", "nested", "nested_protocol4", "legacy",
        "big_endian", "pickle_last", "numpy_inside", "numpy_protocol5", "dialogue_list",
        "dialogue_dict", "embeddings", "embeddings_dict", "llm_cache", "llm_cache_lists"})
    CHECK_MESSAGE(checked.count(name) == 1, name);
}

TEST_CASE("every refused .pt fixture fails with its expected message") {
  std::size_t refused = 0;
  for (const auto& path : expected_tree::fixtures(kData, ".pt")) {
    const auto expected = expected_tree::load_expected(path);
    if (!expected.contains("error")) continue;
    INFO("fixture " << path.filename().string());
    const std::string message = error_of(path);
    const auto want = expected["error"].get<std::string>();
    if (expected["exact"].get<bool>())
      CHECK(message == path.string() + ": " + want);
    else
      CHECK_MESSAGE(message.find(want) != std::string::npos, message);
    CHECK(message.rfind(path.string() + ": ", 0) == 0);
    ++refused;
  }
  CHECK(refused >= 10);
}

TEST_CASE("a pickle that would run os.system is refused and nothing runs") {
  fs::remove(kExecutedMarker);
  for (const char* name : {"malicious.pt", "malicious_protocol4.pt", "malicious_legacy.pt"}) {
    INFO(name);
    CHECK(error_of(kData / name).find("refusing global 'posix.system' in ") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(kExecutedMarker));
}

TEST_CASE("views share one storage and the storage is the file's memory map") {
  const Value root = read_pt((kData / "views.pt").string());
  const auto& base = tensor_at(root, "base");
  for (const char* name : {"transposed", "sliced", "row", "every_other", "element"})
    CHECK(tensor_at(root, name).storage.get() == base.storage.get());
  CHECK(tensor_at(root, "sliced").storage_offset == 8);
  CHECK(base.is_contiguous_le());
  CHECK_FALSE(tensor_at(root, "transposed").is_contiguous_le());

  // Distinct storages of one file are views of the same mapping, not copies.
  const Value dtypes = read_pt((kData / "dtypes.pt").string());
  const auto& f32 = tensor_at(dtypes, "f32");
  const auto& i64 = tensor_at(dtypes, "i64");
  CHECK(f32.storage.get() != i64.storage.get());
  CHECK(f32.storage->owner.get() == i64.storage->owner.get());
  // torch aligns storage records to 64 bytes inside the archive, so the views are aligned too.
  CHECK(reinterpret_cast<std::uintptr_t>(f32.storage->bytes.data()) % 64 == 0);
}

TEST_CASE("the tree outlives everything but itself: tensors keep the mapping alive") {
  Tensor kept;
  {
    const Value root = read_pt((kData / "embeddings_dict.pt").string());
    kept = tensor_at(root, "embeddings");
  }
  std::vector<std::byte> dense(kept.nbytes());
  kept.copy_row_major(0, dense);
  const auto expected = expected_tree::load_expected(kData / "embeddings_dict.pt");
  CHECK(expected_tree::to_hex(dense) == expected["value"]["items"][0][1]["hex"].get<std::string>());
}

TEST_CASE("big-endian archives mark their tensors, and bytes come out little-endian") {
  const Value root = read_pt((kData / "big_endian.pt").string());
  CHECK(tensor_at(root, "f32").big_endian);
  CHECK(tensor_at(root, "i64").big_endian);
  CHECK_FALSE(tensor_at(root, "u8").big_endian);
  float first = 0;
  tensor_at(root, "f32").copy_row_major(0, std::as_writable_bytes(std::span(&first, 1)));
  CHECK(first == 1.0f);
}

TEST_CASE("torch 2.x archives (byteorder and serialization_id records) load") {
  if (!fs::exists(kTorch2)) {
    MESSAGE("skipped: " << kTorch2.string()
                        << " is absent (only present in the project workspace)");
    return;
  }
  const std::vector<std::int64_t> values{1, 2, 3, 4, 5, 6, 7, 8};
  auto check = [&](const Tensor& tensor) {
    CHECK(tensor.dtype == DType::i64);
    CHECK(tensor.shape == std::vector<std::int64_t>{2, 4});
    CHECK_FALSE(tensor.big_endian);
    std::vector<std::int64_t> out(8);
    tensor.copy_row_major(0, std::as_writable_bytes(std::span(out)));
    CHECK(out == values);
  };
  const Value ordered = read_pt((kTorch2 / "ordered_dict_int64.pt").string());
  REQUIRE(ordered.as_dict()->items.size() == 1);
  check(tensor_at(ordered, "test"));
  const Value with_key = read_pt((kTorch2 / "with_key.pt").string());
  const Value* state = with_key.as_dict()->find("model_state_dict");
  REQUIRE(state != nullptr);
  check(tensor_at(*state, "test"));
}

TEST_CASE("data.pkl read beside the directory gives what reading on one thread gives") {
  // torch writes data.pkl first, and with threads its pickle runs while another thread parses the
  // directory; pickle_last.pt puts it last, so the reader must fall back to reading it afterwards.
  for (const auto& path : expected_tree::fixtures(kData, ".pt")) {
    INFO("fixture " << path.filename().string());
    CHECK(read_outcome(path, 0) == read_outcome(path, 1));
  }
  for (const char* name : {"dtypes.pt", "pickle_last.pt", "big_endian.pt"}) {
    INFO(name);
    const auto original = read_bytes(kData / name);
    const fs::path copy = scratch(std::string("threads_") + name);
    // Every single-byte corruption, on one thread and on two: the same tree or the same error.
    for (std::size_t at = 0; at < original.size(); ++at) {
      auto corrupted = original;
      corrupted[at] = static_cast<char>(corrupted[at] ^ 0x5a);
      write_bytes(copy, corrupted);
      INFO("byte " << at);
      CHECK(read_outcome(copy, 0) == read_outcome(copy, 1));
    }
    fs::remove(copy);
  }
}

TEST_CASE("a missing file is an error naming it") {
  CHECK(error_of(kData / "does_not_exist.pt").find("does_not_exist.pt: cannot open") !=
        std::string::npos);
}

// Every truncation and every single-byte corruption must either load or raise gpucache::Error:
// never crash, hang or read out of bounds (run under -DGPUCACHE_SANITIZE=ON to see the latter).
TEST_CASE("truncated and corrupted copies of real files never crash") {
  for (const char* name : {"dtypes.pt", "legacy.pt", "numpy_inside.pt", "nested_protocol4.pt"}) {
    INFO(name);
    const auto original = read_bytes(kData / name);
    REQUIRE(!original.empty());
    const fs::path copy = scratch(name);
    std::size_t errors = 0;
    for (std::size_t length = 0; length < original.size(); ++length) {
      write_bytes(copy, std::vector<char>(original.begin(),
                                          original.begin() + static_cast<std::ptrdiff_t>(length)));
      try {
        read_pt(copy.string());
      } catch (const Error&) {
        ++errors;
      }
    }
    CHECK(errors == original.size());  // no proper prefix is a complete file
    for (std::size_t at = 0; at < original.size(); ++at) {
      auto corrupted = original;
      corrupted[at] = static_cast<char>(corrupted[at] ^ 0x5a);
      write_bytes(copy, corrupted);
      try {
        touch_all(read_pt(copy.string()));
      } catch (const Error&) {
      }
    }
    fs::remove(copy);
  }
}
