// .npz archives (np.savez, np.savez_compressed) and the .npy header parser under them.
#include <doctest/doctest.h>

#include <filesystem>

#include "expected_tree.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/npz.hpp"
#include "npy/npy_header.hpp"
#include "test_support.hpp"
#include "zip/zip.hpp"

using namespace gpucache;
namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(GPUCACHE_TEST_DATA) / "npz";

// A .npy file: magic, version, header length, the header dict padded with spaces, then data.
std::string npy(std::string_view dict, std::string_view data, int major = 1) {
  std::string header(dict);
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (std::size_t i = 0; i < prefix - 8; ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data);
}

std::span<const std::byte> as_span(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

detail::NpyHeader header_of(const std::string& file) {
  return detail::parse_npy_header(as_span(file), "x.npy");
}

std::string header_error(const std::string& file) {
  try {
    detail::npy_tensor(as_span(file), nullptr, "x.npy");
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

bool contains(const std::string& message, const std::string& part) {
  const bool found = message.find(part) != std::string::npos;
  if (!found) MESSAGE("message was: " << message);
  return found;
}

}  // namespace

TEST_CASE("every loadable .npz fixture matches what numpy wrote") {
  std::size_t checked = 0;
  for (const auto& path : expected_tree::fixtures(kData, ".npz")) {
    const auto expected = expected_tree::load_expected(path);
    if (!expected.contains("value")) continue;
    INFO("fixture " << path.filename().string());
    expected_tree::check_value(read_npz(path.string()), expected["value"]);
    ++checked;
  }
  CHECK(checked == 3);
}

TEST_CASE("stored members are views of the file, deflated ones own their bytes") {
  const Value stored = read_npz((kData / "stored.npz").string());
  const auto& items = stored.as_dict()->items;
  REQUIRE(items.size() > 2);
  const auto& first = *items[0].second.as_tensor();
  const auto& second = *items[1].second.as_tensor();
  CHECK(first.storage->owner == second.storage->owner);  // the one MappedFile

  const Value deflated = read_npz((kData / "deflated.npz").string());
  const auto& inflated_first = *deflated.as_dict()->items[0].second.as_tensor();
  const auto& inflated_second = *deflated.as_dict()->items[1].second.as_tensor();
  CHECK(inflated_first.storage->owner != inflated_second.storage->owner);
}

TEST_CASE("deflated members read on several threads give the same arrays as on one") {
  const std::string path = (kData / "deflated.npz").string();
  const Value one = read_npz(path, ReadOptions{1});
  for (unsigned threads : {2u, 8u, 0u}) {
    CAPTURE(threads);
    const Value many = read_npz(path, ReadOptions{threads});
    const auto& want = one.as_dict()->items;
    const auto& got = many.as_dict()->items;
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      CAPTURE(want[i].first);
      CHECK(got[i].first == want[i].first);
      const Tensor& a = *want[i].second.as_tensor();
      const Tensor& b = *got[i].second.as_tensor();
      CHECK(a.shape == b.shape);
      CHECK(a.strides == b.strides);
      const auto a_bytes = a.storage->bytes, b_bytes = b.storage->bytes;
      CHECK(std::equal(a_bytes.begin(), a_bytes.end(), b_bytes.begin(), b_bytes.end()));
    }
  }
}

TEST_CASE("the error is the first bad member's, whatever the thread count") {
  test_support::ScratchDir scratch;
  const std::string copy = scratch / "two_bad.npz";
  fs::copy_file(kData / "deflated.npz", copy);
  std::vector<std::string> names;
  {
    const detail::ZipArchive archive(detail::MappedFile::open(copy));
    REQUIRE(archive.members().size() > 9);
    for (std::size_t bad : {3u, 9u}) {
      const auto& member = archive.members()[bad];
      names.push_back(member.name);
      test_support::flip_byte(copy, member.data_offset + member.compressed_size / 2, 0xff);
    }
  }
  for (unsigned threads : {1u, 2u, 8u}) {
    CAPTURE(threads);
    CHECK_THROWS_WITH_AS(read_npz(copy, ReadOptions{threads}),
                         doctest::Contains((copy + ": member " + names[0] + ": ").c_str()), Error);
  }
}

TEST_CASE("object arrays and non-zip files are refused") {
  const auto object = kData / "object.npz";
  const auto expected = expected_tree::load_expected(object);
  CHECK_THROWS_WITH_AS(read_npz(object.string()),
                       doctest::Contains(expected["error"].get<std::string>().c_str()), Error);
  CHECK_THROWS_WITH_AS(read_npz((fs::path(GPUCACHE_TEST_DATA) / "pt" / "not_zip.pt").string()),
                       doctest::Contains("not an .npz archive: it does not start with a zip"),
                       Error);
}

TEST_CASE("npy headers: versions, byte orders, Fortran order") {
  const auto v1 = header_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", ""));
  CHECK(v1.dtype == DType::f32);
  CHECK_FALSE(v1.big_endian);
  CHECK_FALSE(v1.fortran_order);
  CHECK(v1.shape == std::vector<std::int64_t>{3, 4});
  CHECK(v1.data_offset == 128);  // numpy pads the header so the data starts 64-byte aligned
  const auto v2 =
      header_of(npy("{\"descr\": \">i8\", \"fortran_order\": True, \"shape\": (2L,)}", "", 2));
  CHECK(v2.dtype == DType::i64);
  CHECK(v2.big_endian);
  CHECK(v2.fortran_order);
  CHECK(v2.shape == std::vector<std::int64_t>{2});
  CHECK(
      header_of(npy("{'shape': (), 'fortran_order': False, 'descr': '|b1'}", "", 3)).shape.empty());
  CHECK_FALSE(
      header_of(npy("{'descr': '>u1', 'fortran_order': False, 'shape': (1,)}", "")).big_endian);

  const std::pair<const char*, DType> codes[] = {
      {"<f2", DType::f16},     {"<f4", DType::f32}, {"<f8", DType::f64}, {">f4", DType::f32},
      {"|b1", DType::boolean}, {"|u1", DType::u8},  {"|i1", DType::i8},  {"<i2", DType::i16},
      {"<i4", DType::i32},     {"<i8", DType::i64}, {"<u2", DType::u16}, {"<u4", DType::u32},
      {"<u8", DType::u64},     {"=f8", DType::f64}};
  for (const auto& [code, dtype] : codes) {
    INFO(code);
    CHECK(header_of(
              npy(std::string("{'descr': '") + code + "', 'fortran_order': False, 'shape': (1,)}",
                  ""))
              .dtype == dtype);
  }
}

TEST_CASE("npy tensors: Fortran strides and data length") {
  const std::string data("\1\0\2\0\3\0\4\0\5\0\6\0", 12);
  const std::string file = npy("{'descr': '<i2', 'fortran_order': True, 'shape': (2, 3), }", data);
  const Tensor tensor = detail::npy_tensor(as_span(file), nullptr, "x.npy");
  CHECK(tensor.strides == std::vector<std::int64_t>{1, 2});
  std::vector<std::int16_t> out(6);
  tensor.copy_row_major(0, std::as_writable_bytes(std::span(out)));
  CHECK(out == std::vector<std::int16_t>{1, 3, 5, 2, 4, 6});
  // Bytes after the data are ignored, as np.load ignores them; the tensor covers the data only.
  const Tensor longer = detail::npy_tensor(
      as_span(npy("{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }", data + "x")),
      nullptr, "x.npy");
  CHECK(longer.storage->bytes.size() == 12);
  CHECK(contains(
      header_error(npy("{'descr': '<i2', 'fortran_order': False, 'shape': (2, 4), }", data)),
      "shape needs 16 data bytes but 12 follow the header"));
  CHECK(contains(
      header_error(
          npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", "")),
      "x.npy: npy header: shape has more elements than fit in 64 bits"));
  const Tensor empty = detail::npy_tensor(
      as_span(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", "")), nullptr,
      "x.npy");
  CHECK(empty.numel() == 0);
}

TEST_CASE("malformed npy headers are errors") {
  CHECK(contains(header_error("\x93NUMPX\1\0"), "not a .npy array (bad magic)"));
  CHECK(contains(header_error(std::string("\x93NUMPY\4\0\0\0", 10)), "unsupported .npy version 4"));
  CHECK(contains(header_error(std::string("\x93NUMPY\1\0\xff\x00{", 11)),
                 "header of 255 bytes runs past the end"));
  CHECK(contains(header_error(std::string("\x93NUMPY\2\0\0\0\0\x10", 12)),
                 "header of 268435456 bytes exceeds numpy's limit of 10000"));
  CHECK(
      contains(header_error("\x93NUMPY\1"), "npy minor version: needs 1 bytes but only 0 remain"));
  CHECK(contains(header_error(npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", "")),
                 "object arrays (dtype '|O') hold pickled Python objects"));
  CHECK(contains(
      header_error(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", "")),
      "structured dtypes"));
  CHECK(contains(header_error(npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", "")),
                 "dtype '<c8' is not supported"));
  CHECK(contains(header_error(npy("{'descr': '<U0', 'fortran_order': False, 'shape': (1,)}", "")),
                 "dtype '<U0' holds strings of no characters: not supported"));
  CHECK(contains(header_error(npy("{'descr': '<V3', 'fortran_order': False, 'shape': (1,)}", "")),
                 "dtype '<V3' is not supported"));
  CHECK(contains(header_error(npy("{'descr': '<f', 'fortran_order': False, 'shape': (1,)}", "")),
                 "dtype '<f' is not supported"));
  CHECK(contains(header_error(npy("{'descr': '<f4', 'shape': (1,)}", "")),
                 "must have 'descr', 'fortran_order' and 'shape'"));
  CHECK(contains(header_error(npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "")),
                 "must be True or False"));
  CHECK(contains(header_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", "")),
                 "shape must be a tuple of integers"));
  CHECK(contains(
      header_error(
          npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "")),
      "shape dimension too large"));
  CHECK(contains(
      header_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "")),
      "unexpected key 'extra'"));
  CHECK(contains(header_error(npy("{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", "")),
                 "malformed header dict: expected ':'"));
  CHECK(contains(
      header_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} trailing", "")),
      "unexpected text after the header dict"));
  std::string rank33 = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 33; ++i) rank33 += "1,";
  CHECK(contains(header_error(npy(rank33 + ")}", "")),
                 "shape has more than 32 dimensions (numpy's limit)"));
}
