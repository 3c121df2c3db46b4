// The runtime's device loads on a real GPU (label gpu; exits 77 without one): every path's device
// bytes are copied back and compared with the host views. test_runtime_device.cpp covers the same
// logic against a fake CUDA runtime on every machine.
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <cstring>
#include <functional>

#include "gpucache/runtime.hpp"
#include "runtime_test_shards.hpp"

using namespace gpucache;
using namespace gpucache::runtime;
using gpucache::test::TempDir;

namespace {

// cudaMemcpy from the libcudart the runtime loaded (the tests link no CUDA either).
int copy_to_host(void* to, const void* from, std::size_t size) {
  using Memcpy = int (*)(void*, const void*, std::size_t, int);
  static const Memcpy memcpy_fn = [] {
    void* handle = ::dlopen(cuda_library().c_str(), RTLD_NOW | RTLD_NOLOAD);
    return handle ? reinterpret_cast<Memcpy>(::dlsym(handle, "cudaMemcpy")) : nullptr;
  }();
  REQUIRE(static_cast<bool>(memcpy_fn));
  return memcpy_fn(to, from, size, 4 /* cudaMemcpyDefault */);
}

void check_equals_host(const DeviceData& device, const HostData& host) {
  REQUIRE(device.rows() == host.rows());
  for (const DeviceColumn& column : device.columns()) {
    CAPTURE(column.column.name);
    std::vector<std::byte> expected;
    for (const HostPiece& piece : host.pieces(column.column.name))
      expected.insert(expected.end(), piece.data,
                      piece.data + piece.rows * column.column.row_pitch_bytes());
    std::vector<std::byte> actual(expected.size());
    REQUIRE(copy_to_host(actual.data(), column.data, actual.size()) == 0);
    CHECK(actual == expected);
  }
}

std::vector<test::TestColumn> columns(std::uint64_t rows, std::uint64_t dim) {
  return {test::f32_column("emb", rows, dim), test::i64_column("label", rows),
          test::text_column("caption", rows)};
}

}  // namespace

TEST_CASE("to_device on a GPU equals the host views on every read path and placement") {
  REQUIRE(cuda_available());
  TempDir dir;
  test::write_dataset(dir.path(), columns(30000, 100), {12000, 12000, 6000});
  const Dataset dataset = Dataset::open(dir.path().string());
  const HostData host = dataset.to_host();
  for (const ReadMode mode : {ReadMode::automatic, ReadMode::pread}) {
    for (const Placement placement : {Placement::device, Placement::host_pinned}) {
      CAPTURE(static_cast<int>(mode));
      CAPTURE(static_cast<int>(placement));
      DeviceOptions options;
      options.read_mode = mode;
      options.placement = placement;
      options.staging_bytes = 1 << 20;
      const DeviceData device = dataset.to_device(0, options);
      if (placement == Placement::device && mode == ReadMode::pread)
        CHECK(device.stats().shards_staged == 3);
      check_equals_host(device, host);
      check_equals_host(dataset.for_rank(1, 4).to_device(0, options),
                        dataset.for_rank(1, 4).to_host());
    }
  }
}

TEST_CASE("a corrupted shard fails the GPU load") {
  REQUIRE(cuda_available());
  TempDir dir;
  test::write_dataset(dir.path(), columns(3000, 60), {1500, 1500});
  const auto shard1 = dir / "shard-00001.gcs";
  auto bytes = test::read_bytes(shard1.string());
  bytes[4096 + 700 * 256] ^= std::byte{1};
  test::write_bytes(shard1.string(), bytes);
  const Dataset dataset = Dataset::open(dir.path().string());
  for (const ReadMode mode : {ReadMode::automatic, ReadMode::pread}) {
    DeviceOptions options;
    options.read_mode = mode;
    std::string message;
    try {
      dataset.to_device(0, options);
    } catch (const gpucache::Error& error) {
      message = error.what();
    }
    CHECK(message.find(shard1.string()) != std::string::npos);
    CHECK(message.find("chunk hash mismatch") != std::string::npos);
  }
}

TEST_CASE("rows of any shape and sequence columns on a GPU hold what was written") {
  REQUIRE(cuda_available());
  TempDir dir;
  constexpr std::uint64_t rows = 5000;
  const std::vector<test::TestColumn> written{test::u8_image_column("image", rows, {3, 4, 5}),
                                              test::dense_f32_column("dense", rows, 7),
                                              test::i64_column("label", rows),
                                              test::f32_column("emb", rows, 3),
                                              test::i32_sequence_column("tokens", rows),
                                              test::i64_sequence_column("ids", rows),
                                              test::text_column("caption", rows)};
  test::write_dataset(dir.path(), written, {2048, 2048, 904});
  const Dataset dataset = Dataset::open(dir.path().string());
  for (const ReadMode mode : {ReadMode::automatic, ReadMode::pread}) {
    for (const Placement placement : {Placement::device, Placement::host_pinned}) {
      CAPTURE(static_cast<int>(mode));
      CAPTURE(static_cast<int>(placement));
      DeviceOptions options;
      options.read_mode = mode;
      options.placement = placement;
      const std::uint64_t first = 1000;
      const DeviceData device = dataset.select_rows(first, 4500).to_device(0, options);
      REQUIRE(device.columns().size() == 6);  // the text column stays on the host
      for (const DeviceColumn& column : device.columns()) {
        CAPTURE(column.column.name);
        const test::TestColumn* in = nullptr;
        for (const auto& candidate : written)
          if (candidate.column.name == column.column.name) in = &candidate;
        REQUIRE(in != nullptr);
        std::vector<std::byte> actual(column.bytes);
        REQUIRE(copy_to_host(actual.data(), column.data, actual.size()) == 0);
        std::vector<std::byte> expected;
        if (column.column.kind == ColumnKind::tensor) {
          for (std::uint64_t r = 0; r < device.rows(); ++r) {
            const auto row = test::stored_row(*in, first + r);
            expected.insert(expected.end(), row.begin(), row.end());
          }
          CHECK(actual == expected);
          continue;
        }
        std::vector<std::int64_t> offsets(device.rows() + 1), expected_offsets{0};
        REQUIRE(copy_to_host(offsets.data(), column.offsets, offsets.size() * 8) == 0);
        const std::uint64_t itemsize = dtype_size(column.column.dtype);
        for (std::uint64_t r = 0; r < device.rows(); ++r) {
          const auto row = in->row_bytes(first + r);
          expected.insert(expected.end(), row.begin(), row.end());
          expected_offsets.push_back(static_cast<std::int64_t>(expected.size() / itemsize));
        }
        CHECK(offsets == expected_offsets);
        CHECK(actual == expected);
      }
    }
  }
}
