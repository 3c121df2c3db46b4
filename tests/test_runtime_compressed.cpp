// Shards packed with --compress zstd (by the real gpucache binary) load to the host, to a "device"
// (the fake CUDA runtime) through both read modes, and stream, with the bytes of the uncompressed
// pack of the same input; a corrupted frame is refused.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>

#include "fake_cudart/fake_cudart.h"
#include "gpucache/batch_stream.hpp"
#include "gpucache/runtime.hpp"
#include "runtime_test_shards.hpp"
#include "test_support.hpp"

using namespace gpucache;
using namespace gpucache::runtime;

namespace {

const bool fake_selected = (::setenv("GPUCACHE_CUDART", GPUCACHE_FAKE_CUDART, 1), true);

constexpr std::uint64_t kRows = 3000, kDim = 32;

// A [kRows, kDim] f32 .npy whose values repeat often enough to compress.
void write_npy(const std::filesystem::path& path) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(kRows) + ", " + std::to_string(kDim) + "), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const auto length = static_cast<std::uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&length), 2);
  out << header;
  for (std::uint64_t r = 0; r < kRows; ++r)
    for (std::uint64_t j = 0; j < kDim; ++j) {
      const float value = 0.25f + static_cast<float>((r * 7 + j) % 64) / 64.0f;
      out.write(reinterpret_cast<const char*>(&value), 4);
    }
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const gpucache::Error& error) {
    return error.what();
  }
  return "(no error)";
}

std::vector<std::byte> host_column(const Dataset& dataset, const std::string& name) {
  const HostData host = dataset.to_host();
  std::vector<std::byte> out;
  for (const HostPiece& piece : host.pieces(name))
    out.insert(out.end(), piece.data,
               piece.data + piece.rows * host.column(name).row_pitch_bytes());
  return out;
}

}  // namespace

TEST_CASE("compressed shards load and stream with the bytes of the uncompressed ones") {
  REQUIRE(fake_selected);
  test::TempDir dir;
  write_npy(dir / "emb.npy");
  const std::string raw = (dir / "raw").string(), zstd = (dir / "zstd").string();
  REQUIRE(test_support::run_cli(
              {"pack", (dir / "emb.npy").string(), "-o", raw, "--quiet", "--shard-rows", "1024"})
              .exit_code == 0);
  REQUIRE(test_support::run_cli({"pack", (dir / "emb.npy").string(), "-o", zstd, "--quiet",
                                 "--shard-rows", "1024", "--compress", "zstd"})
              .exit_code == 0);
  const Dataset plain = Dataset::open(raw), packed = Dataset::open(zstd);
  REQUIRE(packed.rows() == kRows);
  const auto expected = host_column(plain, "embedding");
  CHECK(host_column(packed, "embedding") == expected);
  CHECK(host_column(packed.select_rows(100, 2500), "embedding") ==
        host_column(plain.select_rows(100, 2500), "embedding"));

  for (const ReadMode mode : {ReadMode::automatic, ReadMode::pread}) {
    fake_cuda_reset();
    DeviceOptions options;
    options.read_mode = mode;
    const DeviceData device = packed.select_columns({"embedding"}).to_device(0, options);
    const DeviceColumn& column = device.column("embedding");
    REQUIRE(column.bytes == expected.size());
    CHECK(std::memcmp(column.data, expected.data(), expected.size()) == 0);
  }

  StreamOptions options;
  options.order.batch_size = 100;
  options.order.seed = 2;
  BatchStream one(plain, options), other(packed, options);
  while (auto batch = one.next()) {
    const auto same = other.next();
    REQUIRE(same);
    CHECK(batch->row_indices() == same->row_indices());
    const BatchColumn& a = batch->column("embedding");
    const BatchColumn& b = same->column("embedding");
    REQUIRE(a.bytes == b.bytes);
    CHECK(std::memcmp(a.data, b.data, a.bytes) == 0);
  }

  // A flipped byte inside shard 1's first zstd frame.
  const auto shard = std::filesystem::path(zstd) / "shard-00001.gcs";
  auto bytes = test::read_bytes(shard.string());
  const auto layout = shard::decode_layout(bytes, shard.string());
  bytes[layout.chunks[0].stored_offset + layout.chunks[0].stored_size / 2] ^= std::byte{0x20};
  test::write_bytes(shard.string(), bytes);
  const std::string message = error_of([&] { Dataset::open(zstd).to_host(); });
  CHECK(message.find(shard.string() + ": chunk 0") != std::string::npos);
  CHECK((message.find("chunk hash mismatch") != std::string::npos ||
         message.find("zstd frame") != std::string::npos));
}
