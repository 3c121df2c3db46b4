// The runtime's device load path on any machine: the runtime is pointed ($GPUCACHE_CUDART) at the
// fake CUDA runtime in tests/fake_cudart, whose "device" memory is host memory, copies are
// asynchronous and sources must be pinned. tests/test_gpu_runtime.cpp runs the same loads on a
// real GPU.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <functional>

#include "fake_cudart/fake_cudart.h"
#include "gpucache/runtime.hpp"
#include "runtime_test_shards.hpp"

using namespace gpucache;
using namespace gpucache::runtime;
using gpucache::test::TempDir;

namespace {

// Before the first CUDA use in this process: the runtime resolves its CUDA library once.
const bool fake_selected = (::setenv("GPUCACHE_CUDART", GPUCACHE_FAKE_CUDART, 1), true);

std::vector<test::TestColumn> columns(std::uint64_t rows, std::uint64_t dim) {
  return {test::f32_column("emb", rows, dim), test::i64_column("label", rows),
          test::text_column("caption", rows)};
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const gpucache::Error& error) {
    return error.what();
  }
  return "(no error)";
}

// The device copy of every tensor column equals the host pieces, byte for byte, padding included,
// as one contiguous [rows, padded_dim] block per column at a 4096-aligned offset.
void check_equals_host(const DeviceData& device, const HostData& host) {
  REQUIRE(device.rows() == host.rows());
  for (const DeviceColumn& column : device.columns()) {
    CAPTURE(column.column.name);
    CHECK(column.offset % 4096 == 0);
    CHECK(column.bytes == device.rows() * column.column.row_pitch_bytes());
    std::vector<std::byte> expected;
    for (const HostPiece& piece : host.pieces(column.column.name))
      expected.insert(expected.end(), piece.data,
                      piece.data + piece.rows * column.column.row_pitch_bytes());
    REQUIRE(expected.size() == column.bytes);
    CHECK(std::memcmp(column.data, expected.data(), expected.size()) == 0);
  }
}

void check_nothing_left() {
  const FakeCudaStats stats = fake_cuda_stats();
  CHECK(stats.live_device_allocations == 0);
  CHECK(stats.live_host_allocations == 0);
  CHECK(stats.live_registrations == 0);
  CHECK(stats.live_streams == 0);
  CHECK(stats.live_events == 0);
  CHECK(stats.pending_copies == 0);
  // No buffer reused, no memory unregistered or freed, while a copy still read it.
  CHECK(stats.misuse == 0);
  CHECK(std::string(fake_cuda_last_misuse()) == "");
}

}  // namespace

TEST_CASE("the fake CUDA runtime is the one loaded") {
  REQUIRE(fake_selected);
  CHECK(cuda_available());
  CHECK(cuda_library() == GPUCACHE_FAKE_CUDART);
}

TEST_CASE("registered path: one allocation, one copy per shard and column, values equal host") {
  fake_cuda_reset();
  TempDir dir;
  test::write_dataset(dir.path(), columns(16, 3), {5, 7, 4});
  const Dataset dataset = Dataset::open(dir.path().string());
  {
    const DeviceData device = dataset.to_device(0);
    const FakeCudaStats stats = fake_cuda_stats();
    CHECK(stats.mallocs == 1);
    CHECK(stats.memcpy_calls == 3 * 2);    // 3 shards × 2 tensor columns; text stays on the host
    CHECK(stats.live_registrations == 0);  // unregistered once the copies completed
    CHECK(device.stats().shards_registered == 3);
    CHECK(device.stats().shards_staged == 0);
    CHECK(device.stats().bytes_verified > 0);
    REQUIRE(device.columns().size() == 2);
    CHECK(device.column("label").column.rank() == 1);
    CHECK(error_of([&] { device.column("caption"); }).find("not among the uploaded") !=
          std::string::npos);
    check_equals_host(device, dataset.to_host());
  }
  check_nothing_left();
}

TEST_CASE("pread path through the staging ring, forced or as the fallback, equals host") {
  // Enough data for many windows per shard so that staging buffers are reused.
  TempDir dir;
  test::write_dataset(dir.path(), columns(24000, 60), {9000, 9000, 6000},
                      {.chunk_size = 4096 * 4, .compressed_flag = false});
  const Dataset dataset = Dataset::open(dir.path().string());
  const HostData host = dataset.to_host();
  for (const bool forced : {true, false}) {
    CAPTURE(forced);
    fake_cuda_reset();
    if (!forced) fake_cuda_set_register_fails(1);
    DeviceOptions options;
    options.read_mode = forced ? ReadMode::pread : ReadMode::automatic;
    options.threads = 3;
    options.staging_bytes = 64 << 10;
    {
      const DeviceData device = dataset.to_device(0, options);
      CHECK(device.stats().shards_staged == 3);
      CHECK(device.stats().shards_registered == 0);
      CHECK(fake_cuda_stats().registers == 0);
      CHECK(fake_cuda_stats().memcpy_calls > 3 * 2 * 10);
      check_equals_host(device, host);
      for (const bool verify : {false}) {
        options.verify = verify;
        check_equals_host(dataset.for_rank(1, 3).to_device(0, options),
                          dataset.for_rank(1, 3).to_host());
        options.verify = true;
      }
    }
    check_nothing_left();
  }
  fake_cuda_reset();
  fake_cuda_set_register_fails(1);
  DeviceOptions strict;
  strict.read_mode = ReadMode::register_mmap;
  CHECK(error_of([&] {
          dataset.to_device(0, strict);
        }).find("cudaHostRegister of the mapped shard failed") != std::string::npos);
  check_nothing_left();
}

TEST_CASE("host_pinned placement fills one mapped pinned allocation") {
  fake_cuda_reset();
  TempDir dir;
  test::write_dataset(dir.path(), columns(16, 3), {5, 7, 4});
  const Dataset dataset = Dataset::open(dir.path().string());
  fake_cuda_set_free_memory(0);  // device memory is not needed for host_pinned
  for (const ReadMode mode : {ReadMode::automatic, ReadMode::pread}) {
    DeviceOptions options;
    options.placement = Placement::host_pinned;
    options.read_mode = mode;
    const DeviceData device = dataset.select_rows(3, 14).to_device(0, options);
    CHECK(device.placement() == Placement::host_pinned);
    CHECK(fake_cuda_stats().mallocs == 0);
    check_equals_host(device, dataset.select_rows(3, 14).to_host());
  }
  check_nothing_left();
}

TEST_CASE("placement auto: the device when the selection and the margin fit, else pinned host") {
  constexpr std::uint64_t gib = std::uint64_t{1} << 30;
  CHECK(placement_margin(80 * gib) == 8 * gib);
  CHECK(placement_margin(4 * gib) == gib);  // at least 1 GiB
  const PlacementChoice fits = choose_placement(12 * gib, 20 * gib, 80 * gib, "cuda:0");
  CHECK(fits.placement == Placement::device);
  CHECK(fits.reason ==
        "needs 12.00 GiB, 20.00 GiB free on cuda:0, margin 8.00 GiB: resident in VRAM");
  const PlacementChoice over = choose_placement(12 * gib + 1, 20 * gib, 80 * gib, "cuda:1");
  CHECK(over.placement == Placement::host_pinned);
  CHECK(over.reason.find("20.00 GiB free on cuda:1, margin 8.00 GiB: does not fit") !=
        std::string::npos);
  // needed + margin would wrap around: still does not fit.
  CHECK(choose_placement(UINT64_MAX, 20 * gib, 80 * gib, "cuda:0").placement ==
        Placement::host_pinned);
}

TEST_CASE("not enough device memory is refused before allocating") {
  fake_cuda_reset();
  TempDir dir;
  test::write_dataset(dir.path(), columns(16, 3), {5, 7, 4});
  const Dataset dataset = Dataset::open(dir.path().string());
  fake_cuda_set_free_memory(1000);
  const std::string message = error_of([&] { dataset.to_device(0); });
  // emb: 16 × 64 bytes, then label at the next 4096: 4096 + 128 bytes in all.
  CHECK(message.find("cuda:0: needs 3.93e-06 GiB, 9.31e-07 GiB free on cuda:0") !=
        std::string::npos);
  CHECK(fake_cuda_stats().mallocs == 0);
  fake_cuda_set_free_memory(4224);
  CHECK(dataset.to_device(0).bytes() == 4224);
}

TEST_CASE("a corrupted shard fails the device load and frees everything") {
  TempDir dir;
  test::write_dataset(dir.path(), columns(3000, 60), {1000, 1000, 1000},
                      {.chunk_size = 4096, .compressed_flag = false});
  const auto shard2 = dir / "shard-00002.gcs";
  auto bytes = test::read_bytes(shard2.string());
  bytes[4096 + 900 * 256 + 3] ^= std::byte{1};  // emb row 900 of shard 2
  test::write_bytes(shard2.string(), bytes);
  const Dataset dataset = Dataset::open(dir.path().string());
  for (const ReadMode mode : {ReadMode::automatic, ReadMode::pread}) {
    for (const Placement placement : {Placement::device, Placement::host_pinned}) {
      fake_cuda_reset();
      DeviceOptions options;
      options.read_mode = mode;
      options.placement = placement;
      const std::string message = error_of([&] { dataset.to_device(0, options); });
      CHECK(message.find(shard2.string() + ": chunk 56, bytes 233472-237567 (column 'emb' rows "
                                           "896-911): chunk hash mismatch") != std::string::npos);
      check_nothing_left();
      options.verify = false;
      CHECK(dataset.to_device(0, options).rows() == 3000);
      CHECK(dataset.for_rank(0, 2).to_device(0).rows() == 1500);  // shard 2 not needed
    }
  }
  check_nothing_left();
}

TEST_CASE("device memory lives while any owner does; the caller's current device is kept") {
  fake_cuda_reset();
  fake_cuda_set_device_count(2);
  TempDir dir;
  test::write_dataset(dir.path(), columns(16, 3), {5, 7, 4});
  const Dataset dataset = Dataset::open(dir.path().string());
  REQUIRE(cudaSetDevice(1) == 0);
  std::shared_ptr<const void> owner;
  {
    const DeviceData device = dataset.to_device(0);
    CHECK(device.device() == 0);
    owner = device.owner();
  }
  int current = -1;
  cudaGetDevice(&current);
  CHECK(current == 1);
  CHECK(fake_cuda_stats().live_device_allocations == 1);
  owner.reset();
  CHECK(fake_cuda_stats().live_device_allocations == 0);
  CHECK(error_of([&] {
          dataset.to_device(2);
        }).find("cuda:2: no such device: this machine has 2 GPU(s)") != std::string::npos);
  CHECK(dataset.for_rank(0, 17).to_device(0).bytes() == 0);
}

TEST_CASE("automatic read mode: shards CUDA refuses to register fall back to pread") {
  TempDir dir;
  test::write_dataset(dir.path(), columns(3000, 60), {1000, 1000, 1000},
                      {.chunk_size = 4096 * 4, .compressed_flag = false});
  const Dataset dataset = Dataset::open(dir.path().string());
  const HostData host = dataset.to_host();
  fake_cuda_reset();
  fake_cuda_set_register_limit(1);  // shard 0 registers (one range); shard 1 is refused
  {
    DeviceOptions options;
    options.threads = 2;
    options.staging_bytes = 64 << 10;
    const DeviceData device = dataset.to_device(0, options);
    CHECK(device.stats().shards_registered == 1);
    CHECK(device.stats().shards_staged == 2);
    CHECK(fake_cuda_stats().peak_registrations == 1);
    check_equals_host(device, host);
    // Every chunk the copies touch is hashed once, whichever source read it.
    fake_cuda_set_register_fails(1);
    CHECK(dataset.to_device(0, options).stats().bytes_verified == device.stats().bytes_verified);
  }
  check_nothing_left();
  fake_cuda_reset();
  fake_cuda_set_register_limit(1);
  DeviceOptions strict;
  strict.read_mode = ReadMode::register_mmap;
  CHECK(error_of([&] { dataset.to_device(0, strict); })
            .find((dir / "shard-00001.gcs").string() +
                  ": cuda:0: cudaHostRegister of the mapped shard failed") != std::string::npos);
  check_nothing_left();
}

TEST_CASE("a CUDA failure midway reports the call and leaves no copy reading freed memory") {
  TempDir dir;
  test::write_dataset(dir.path(), columns(6000, 60), {2000, 2000, 2000},
                      {.chunk_size = 4096 * 4, .compressed_flag = false});
  const Dataset dataset = Dataset::open(dir.path().string());
  for (const ReadMode mode : {ReadMode::automatic, ReadMode::pread}) {
    CAPTURE(static_cast<int>(mode));
    fake_cuda_reset();
    fake_cuda_set_copy_delay_us(2000);  // earlier copies are still pending when the failure hits
    fake_cuda_fail_call("cudaMemcpyAsync", 2, 3);
    DeviceOptions options;
    options.read_mode = mode;
    options.threads = 3;
    options.staging_bytes = 64 << 10;
    CHECK(error_of([&] { dataset.to_device(0, options); }).find(": cudaMemcpyAsync of ") !=
          std::string::npos);
    check_nothing_left();
  }
}
