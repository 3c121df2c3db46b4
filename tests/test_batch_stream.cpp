// The batch stream (gpucache/batch_stream.hpp) on the host and, against the fake CUDA runtime, to
// a "device": batches hold exactly the rows BatchOrder names with every column kind's bytes,
// epochs advance and reshuffle, seek resumes exactly, every chunk is hashed once per epoch and a
// corrupted one is refused, and memory stays within the prefetch bound.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <functional>

#include "fake_cudart/fake_cudart.h"
#include "gpucache/batch_stream.hpp"
#include "gpucache/gpucache.h"
#include "runtime_test_shards.hpp"

using namespace gpucache;
using namespace gpucache::runtime;
using gpucache::test::TempDir;

namespace {

const bool fake_selected = (::setenv("GPUCACHE_CUDART", GPUCACHE_FAKE_CUDART, 1), true);

std::vector<test::TestColumn> columns(std::uint64_t rows) {
  return {test::f32_column("emb", rows, 10), test::i64_column("label", rows),
          test::text_column("caption", rows), test::i32_sequence_column("tokens", rows),
          test::u8_image_column("image", rows, {3, 4, 5})};
}

StreamOptions options_for(std::uint64_t batch_size, std::uint64_t seed = 0) {
  StreamOptions options;
  options.order.batch_size = batch_size;
  options.order.seed = seed;
  options.prefetch = 3;
  options.threads = 2;
  return options;
}

// Every column of `batch` holds exactly the stored bytes of its rows (copied to host first when
// `host_copy` is given).
void check_batch(const Batch& batch, const std::vector<test::TestColumn>& in) {
  for (const test::TestColumn& column : in) {
    CAPTURE(column.column.name);
    const BatchColumn& out = batch.column(column.column.name);
    if (!out.column.variable_length()) {
      const std::uint64_t pitch = out.column.row_pitch_bytes();
      REQUIRE(out.bytes == batch.rows() * pitch);
      for (std::uint64_t i = 0; i < batch.rows(); ++i) {
        const auto expected = test::stored_row(column, batch.row_indices()[i]);
        CHECK(std::memcmp(out.data + i * pitch, expected.data(), pitch) == 0);
      }
      continue;
    }
    const std::uint64_t itemsize = dtype_size(out.column.dtype);
    CHECK(out.offsets[0] == 0);
    CHECK(static_cast<std::uint64_t>(out.offsets[batch.rows()]) == out.values);
    for (std::uint64_t i = 0; i < batch.rows(); ++i) {
      const auto expected = column.row_bytes(batch.row_indices()[i]);
      const std::uint64_t size = (out.offsets[i + 1] - out.offsets[i]) * itemsize;
      REQUIRE(size == expected.size());
      if (size)
        CHECK(std::memcmp(out.data + out.offsets[i] * itemsize, expected.data(), size) == 0);
    }
  }
}

std::vector<std::vector<std::uint64_t>> epoch_rows(BatchStream& stream) {
  std::vector<std::vector<std::uint64_t>> rows;
  while (auto batch = stream.next()) rows.push_back(batch->row_indices());
  return rows;
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const gpucache::Error& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("host batches hold BatchOrder's rows with every column kind") {
  TempDir dir;
  const auto in = columns(500);
  test::write_dataset(dir.path(), in, {200, 150, 150});
  const Dataset dataset = Dataset::open(dir.path().string());
  StreamOptions options = options_for(32, 7);
  options.order.world_size = 2;
  options.order.rank = 1;
  BatchStream stream(dataset, options);
  OrderOptions order = options.order;
  order.rows = 500;
  const BatchOrder expected(order);
  REQUIRE(stream.batches() == expected.batches());
  std::uint64_t index = 0;
  while (auto batch = stream.next()) {
    CHECK(batch->epoch() == 0);
    CHECK(batch->index() == index);
    CHECK(batch->device() == -1);
    CHECK(batch->row_indices() == expected.batch(index));
    check_batch(*batch, in);
    ++index;
  }
  CHECK(index == expected.batches());
  CHECK(stream.epoch() == 1);
  CHECK(stream.position() == 0);
}

TEST_CASE("streams with a stride share an epoch: each takes every stride-th batch") {
  TempDir dir;
  const auto in = columns(300);
  test::write_dataset(dir.path(), in, {100, 100, 100});
  const Dataset dataset = Dataset::open(dir.path().string());
  const auto whole = [&] {
    BatchStream stream(dataset, options_for(16, 3));
    return epoch_rows(stream);
  }();
  for (const std::uint64_t stride : {2ull, 4ull}) {
    CAPTURE(stride);
    for (std::uint64_t worker = 0; worker < stride; ++worker) {
      StreamOptions options = options_for(16, 3);
      options.stride = stride;
      BatchStream stream(dataset, options);
      stream.seek(0, worker);
      std::uint64_t expected = worker;
      while (auto batch = stream.next()) {
        CHECK(batch->index() == expected);
        CHECK(batch->row_indices() == whole[expected]);
        check_batch(*batch, in);
        expected += stride;
      }
      CHECK(expected >= whole.size());
      CHECK(stream.epoch() == 1);
    }
  }
  StreamOptions zero = options_for(16, 3);
  zero.stride = 0;
  CHECK_THROWS_WITH_AS(BatchStream(dataset, zero), doctest::Contains("stride must be at least 1"),
                       gpucache::Error);
}

TEST_CASE("epochs reshuffle, seek resumes exactly, selections are honoured") {
  TempDir dir;
  const auto in = columns(300);
  test::write_dataset(dir.path(), in, {100, 100, 100});
  const Dataset dataset = Dataset::open(dir.path().string());
  BatchStream stream(dataset, options_for(16, 3));
  const auto epoch0 = epoch_rows(stream);
  const auto epoch1 = epoch_rows(stream);
  CHECK(epoch0.size() == 18);
  CHECK(epoch0 != epoch1);
  for (const std::uint64_t k : {0ull, 5ull, 17ull, 18ull}) {
    CAPTURE(k);
    BatchStream resumed(dataset, options_for(16, 3));
    resumed.seek(1, k);
    const auto rest = epoch_rows(resumed);
    CHECK(rest == std::vector(epoch1.begin() + static_cast<std::ptrdiff_t>(k), epoch1.end()));
    CHECK(resumed.epoch() == 2);
  }
  // Abandoning an epoch midway and seeking back gives the same batches again.
  stream.seek(0, 0);
  CHECK(stream.next()->row_indices() == epoch0[0]);
  stream.seek(0, 0);
  CHECK(epoch_rows(stream) == epoch0);

  const Dataset slice = dataset.select_rows(50, 250).select_columns({"tokens", "emb"});
  StreamOptions plain = options_for(64);
  plain.order.shuffle = false;
  plain.order.drop_last = false;
  BatchStream sequential(slice, plain);
  std::uint64_t next = 0;
  while (auto batch = sequential.next()) {
    CHECK(batch->columns().size() == 2);
    for (const std::uint64_t row : batch->row_indices()) CHECK(row == next++);
    // Rows of the selection: row i is row 50 + i of the dataset.
    const BatchColumn& emb = batch->column("emb");
    float first = 0;
    std::memcpy(&first, emb.data, 4);
    CHECK(first == test::test_value(50 + batch->row_indices()[0], 0));
  }
  CHECK(next == 200);
}

TEST_CASE("every chunk is hashed once per epoch; a corrupted chunk is refused") {
  TempDir dir;
  const auto in = columns(400);
  test::write_dataset(dir.path(), in, {200, 200}, {.chunk_size = 4096});
  const Dataset dataset = Dataset::open(dir.path().string());
  StreamOptions options = options_for(50);
  options.order.drop_last = false;
  {
    BatchStream stream(dataset, options);
    epoch_rows(stream);
    const std::uint64_t once = stream.stats().bytes_verified;
    CHECK(once > 0);
    epoch_rows(stream);
    CHECK(stream.stats().bytes_verified == 2 * once);
  }
  const auto shard1 = dir / "shard-00001.gcs";
  auto bytes = test::read_bytes(shard1.string());
  bytes[4096 + 120 * 64 + 3] ^= std::byte{1};  // emb row 120 of shard 1 (row 320)
  test::write_bytes(shard1.string(), bytes);
  const Dataset corrupted = Dataset::open(dir.path().string());
  BatchStream stream(corrupted, options);
  const std::string message = error_of([&] { epoch_rows(stream); });
  CHECK(message.find(shard1.string() + ": chunk") != std::string::npos);
  CHECK(message.find("chunk hash mismatch") != std::string::npos);
  options.verify = false;
  BatchStream unchecked(corrupted, options);
  CHECK(epoch_rows(unchecked).size() == 8);
  CHECK(unchecked.stats().bytes_verified == 0);
}

TEST_CASE("memory stays within prefetch blocks plus those the consumer holds") {
  TempDir dir;
  const auto in = columns(1000);
  test::write_dataset(dir.path(), in, {1000});
  const Dataset dataset = Dataset::open(dir.path().string());
  StreamOptions options = options_for(10);
  options.prefetch = 4;
  BatchStream stream(dataset, options);
  epoch_rows(stream);  // each batch let go before the next
  CHECK(stream.stats().batches == 100);
  CHECK(stream.stats().peak_blocks <= options.prefetch + 1);
  std::vector<Batch> held;
  for (int i = 0; i < 6; ++i) held.push_back(*stream.next());
  CHECK(stream.stats().peak_blocks <= options.prefetch + 6);
  for (const Batch& batch : held) check_batch(batch, in);  // held blocks are never reused
}

TEST_CASE("a GPU stream copies each batch on its own stream; the consumer waits on an event") {
  REQUIRE(fake_selected);
  fake_cuda_reset();
  TempDir dir;
  const auto in = columns(300);
  test::write_dataset(dir.path(), in, {100, 200});
  const Dataset dataset = Dataset::open(dir.path().string());
  void* consumer = nullptr;  // the training loop's stream
  REQUIRE(cudaStreamCreateWithFlags(&consumer, 1) == 0);
  {
    StreamOptions options = options_for(24, 1);
    options.device = 0;
    BatchStream stream(dataset, options);
    std::uint64_t batches = 0;
    for (int epoch = 0; epoch < 2; ++epoch) {
      while (auto batch = stream.next()) {
        CHECK(batch->device() == 0);
        batch->wait(consumer);
        // The fake's device memory is host memory: read it once the consumer's stream got there.
        REQUIRE(cudaStreamSynchronize(consumer) == 0);
        check_batch(*batch, in);
        ++batches;
      }
    }
    CHECK(batches == 24);
    CHECK(fake_cuda_stats().memcpy_calls == 24);
    CHECK(stream.stats().peak_blocks <= options.prefetch + 1);
  }
  REQUIRE(cudaStreamDestroy(consumer) == 0);
  CHECK(fake_cuda_stats().misuse == 0);

  // A consumer on the legacy default stream (PyTorch's default stream: handle 0) works the same.
  {
    StreamOptions options = options_for(24, 1);
    options.device = 0;
    BatchStream stream(dataset, options);
    std::uint64_t batches = 0;
    while (auto batch = stream.next()) {
      batch->wait(nullptr);
      REQUIRE(cudaStreamSynchronize(nullptr) == 0);
      check_batch(*batch, in);
      ++batches;
    }
    CHECK(batches == 12);
  }
  CHECK(fake_cuda_stats().misuse == 0);
  CHECK(std::string(fake_cuda_last_misuse()) == "");

  // No GPU: the error says so in plain words.
  fake_cuda_set_device_count(0);
  StreamOptions options = options_for(24);
  options.device = 0;
  const std::string message = error_of([&] { BatchStream(dataset, options); });
  CHECK(message.find("cudaGetDeviceCount failed") != std::string::npos);
  CHECK(message.find("no CUDA GPU that this process may use") != std::string::npos);
  fake_cuda_set_device_count(1);
  options.device = 3;
  CHECK(error_of([&] { BatchStream(dataset, options); }).find("no such device") !=
        std::string::npos);
  fake_cuda_reset();
  const FakeCudaStats stats = fake_cuda_stats();
  CHECK(stats.live_device_allocations == 0);
  CHECK(stats.live_host_allocations == 0);
  CHECK(stats.live_streams == 0);
  CHECK(stats.live_events == 0);
  CHECK(stats.misuse == 0);
  CHECK(std::string(fake_cuda_last_misuse()) == "");
}

TEST_CASE("the C ABI streams the same batches and resumes with seek") {
  TempDir dir;
  const auto in = columns(200);
  test::write_dataset(dir.path(), in, {120, 80});
  gpucache_dataset* dataset = nullptr;
  REQUIRE(gpucache_open(dir.path().c_str(), &dataset) == 0);
  gpucache_stream_options options;
  gpucache_stream_options_init(&options);
  options.order.batch_size = 30;
  options.order.seed = 4;
  gpucache_stream* stream = nullptr;
  REQUIRE(gpucache_stream_open(dataset, &options, &stream) == 0);
  gpucache_dataset_free(dataset);  // the stream keeps what it needs
  CHECK(gpucache_stream_batches(stream) == 6);
  OrderOptions order;
  order.rows = 200;
  order.batch_size = 30;
  order.seed = 4;
  const BatchOrder expected(order);
  for (std::uint64_t b = 0; b < 6; ++b) {
    gpucache_batch* batch = nullptr;
    REQUIRE(gpucache_stream_next(stream, &batch) == 0);
    REQUIRE(batch != nullptr);
    REQUIRE(gpucache_batch_rows(batch) == 30);
    const std::vector<std::uint64_t> rows(gpucache_batch_row_indices(batch),
                                          gpucache_batch_row_indices(batch) + 30);
    CHECK(rows == expected.batch(b));
    void* data = nullptr;
    std::int64_t* offsets = nullptr;
    std::uint64_t values = 0;
    REQUIRE(gpucache_batch_column(batch, "tokens", &data, nullptr, &offsets, &values) == 0);
    CHECK(static_cast<std::uint64_t>(offsets[30]) == values);
    std::int64_t label = 0;
    REQUIRE(gpucache_batch_column(batch, "label", &data, nullptr, nullptr, nullptr) == 0);
    std::memcpy(&label, data, 8);
    CHECK(label == 7 * static_cast<std::int64_t>(rows[0]) - 3);
    CHECK(gpucache_batch_wait(batch, nullptr) == 0);
    CHECK(gpucache_batch_column(batch, "nope", &data, nullptr, nullptr, nullptr) == -1);
    gpucache_batch_free(batch);
  }
  gpucache_batch* end = nullptr;
  REQUIRE(gpucache_stream_next(stream, &end) == 0);
  CHECK(end == nullptr);
  std::uint64_t epoch = 0, position = 9;
  gpucache_stream_position(stream, &epoch, &position);
  CHECK(epoch == 1);
  CHECK(position == 0);
  REQUIRE(gpucache_stream_seek(stream, 0, 4) == 0);
  gpucache_batch* resumed = nullptr;
  REQUIRE(gpucache_stream_next(stream, &resumed) == 0);
  CHECK(std::vector<std::uint64_t>(gpucache_batch_row_indices(resumed),
                                   gpucache_batch_row_indices(resumed) + 30) == expected.batch(4));
  gpucache_stream_free(stream);
  CHECK(gpucache_batch_rows(resumed) == 30);  // outlives the stream
  gpucache_batch_free(resumed);
}
