// The C ABI (gpucache/gpucache.h): handles, views, text, rank slicing, device loads (against the
// fake CUDA runtime, as in test_runtime_device.cpp) and error reporting through
// gpucache_last_error().
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "fake_cudart/fake_cudart.h"
#include "gpucache/gpucache.h"
#include "runtime_test_shards.hpp"

using gpucache::test::TempDir;
namespace test = gpucache::test;

namespace {

const bool fake_selected = (::setenv("GPUCACHE_CUDART", GPUCACHE_FAKE_CUDART, 1), true);

std::string last_error() {
  return gpucache_last_error();
}

}  // namespace

extern "C" long long c_rows_of_rank(const char* path, unsigned rank, unsigned world_size);
extern "C" long long c_sequence_values(const char* path, const char* column);
extern "C" long long c_row_elements(const char* path, size_t index);

namespace {

struct Fixture {
  TempDir dir;
  std::vector<test::TestColumn> columns{test::f32_column("emb", 16, 3),
                                        test::i64_column("label", 16),
                                        test::text_column("caption", 16)};
  gpucache_dataset* dataset = nullptr;
  Fixture() {
    test::write_dataset(dir.path(), columns, {5, 7, 4});
    REQUIRE(gpucache_open(dir.path().c_str(), &dataset) == 0);
  }
  ~Fixture() { gpucache_dataset_free(dataset); }
};

}  // namespace

TEST_CASE_FIXTURE(Fixture, "open, list columns and read host views through the C ABI") {
  CHECK(gpucache_dataset_total_rows(dataset) == 16);
  CHECK(gpucache_dataset_rows(dataset) == 16);
  CHECK(gpucache_dataset_shard_count(dataset) == 3);
  REQUIRE(gpucache_dataset_column_count(dataset) == 3);
  gpucache_column column{};
  REQUIRE(gpucache_dataset_column(dataset, 0, &column) == 0);
  CHECK(std::string(column.name) == "emb");
  CHECK(column.kind == GPUCACHE_KIND_TENSOR);
  CHECK(column.dtype == 1);
  CHECK(std::string(column.dtype_name) == "f32");
  CHECK(column.dim == 3);
  CHECK(column.padded_dim == 16);
  CHECK(column.row_pitch_bytes == 64);
  REQUIRE(gpucache_dataset_column(dataset, 2, &column) == 0);
  CHECK(column.kind == GPUCACHE_KIND_TEXT);
  CHECK(gpucache_dataset_column(dataset, 3, &column) == -1);
  CHECK(last_error().find("out of range") != std::string::npos);

  gpucache_host_data* host = nullptr;
  REQUIRE(gpucache_to_host(dataset, nullptr, &host) == 0);
  CHECK(gpucache_host_data_rows(host) == 16);
  size_t count = 0;
  REQUIRE(gpucache_host_piece_count(host, "emb", &count) == 0);
  REQUIRE(count == 3);
  gpucache_host_piece piece{};
  REQUIRE(gpucache_host_get_piece(host, "emb", 1, &piece) == 0);
  CHECK(piece.rows == 7);
  CHECK(piece.first_row == 5);
  CHECK(piece.shard_index == 1);
  CHECK(reinterpret_cast<std::uintptr_t>(piece.data) % 4096 == 0);
  float value;
  std::memcpy(&value, static_cast<const std::byte*>(piece.data) + 2 * 64 + 4, 4);
  CHECK(value == test::test_value(7, 1));
  const char* text = nullptr;
  size_t size = 0;
  REQUIRE(gpucache_host_text(host, "caption", 9, &text, &size) == 0);
  CHECK(std::string(text, size) == columns[2].texts[9]);
  CHECK(gpucache_host_text(host, "emb", 0, &text, &size) == -1);
  CHECK(last_error().find("not a text column") != std::string::npos);
  CHECK(gpucache_host_get_piece(host, "emb", 3, &piece) == -1);
  CHECK(gpucache_host_piece_count(host, "nope", &count) == -1);
  // Shards of 5, 7 and 4 rows end no page: no joined view, use the pieces.
  const void* joined = &joined;
  REQUIRE(gpucache_host_joined(host, "emb", &joined) == 0);
  CHECK(joined == nullptr);
  CHECK(gpucache_host_joined(host, "nope", &joined) == -1);
  CHECK(gpucache_host_joined(host, "emb", nullptr) == -1);

  // The host data outlives the dataset handle.
  gpucache_dataset_free(dataset);
  dataset = nullptr;
  REQUIRE(gpucache_host_get_piece(host, "emb", 0, &piece) == 0);
  std::memcpy(&value, piece.data, 4);
  CHECK(value == test::test_value(0, 0));
  gpucache_host_data_free(host);
}

TEST_CASE_FIXTURE(Fixture, "selections and rank slices through the C ABI") {
  const char* names[] = {"label"};
  gpucache_dataset* labels = nullptr;
  REQUIRE(gpucache_select_columns(dataset, names, 1, &labels) == 0);
  CHECK(gpucache_dataset_column_count(labels) == 1);
  gpucache_dataset* slice = nullptr;
  REQUIRE(gpucache_for_rank(labels, 2, 3, &slice) == 0);
  CHECK(gpucache_dataset_rows(slice) == 5);
  CHECK(gpucache_dataset_row_begin(slice) == 10);
  gpucache_dataset* rows = nullptr;
  REQUIRE(gpucache_select_rows(slice, 1, 3, &rows) == 0);
  CHECK(gpucache_dataset_row_begin(rows) == 11);
  gpucache_host_options options;
  gpucache_host_options_init(&options);
  CHECK(options.verify == 1);
  gpucache_host_data* host = nullptr;
  REQUIRE(gpucache_to_host(rows, &options, &host) == 0);
  gpucache_host_piece piece{};
  REQUIRE(gpucache_host_get_piece(host, "label", 0, &piece) == 0);
  std::int64_t label;
  std::memcpy(&label, piece.data, 8);
  CHECK(label == 11 * 7 - 3);
  gpucache_host_data_free(host);
  gpucache_dataset_free(rows);
  gpucache_dataset_free(slice);
  gpucache_dataset_free(labels);

  gpucache_dataset* bad = reinterpret_cast<gpucache_dataset*>(0x1);
  const char* unknown[] = {"nope"};
  CHECK(gpucache_select_columns(dataset, unknown, 1, &bad) == -1);
  CHECK(bad == nullptr);
  CHECK(last_error().find("column 'nope': no such column") != std::string::npos);
  CHECK(gpucache_for_rank(dataset, 3, 3, &bad) == -1);
  CHECK(gpucache_select_rows(dataset, 5, 99, &bad) == -1);
}

TEST_CASE_FIXTURE(Fixture, "the header works from C") {
  CHECK(c_rows_of_rank(dir.path().c_str(), 1, 3) == 5);
  CHECK(c_rows_of_rank(dir.path().c_str(), 3, 3) == -1);
  CHECK(last_error().find("rank 3: must be below world_size 3") != std::string::npos);
}

TEST_CASE("errors come back as -1 with a message, never as a crash") {
  gpucache_dataset* dataset = nullptr;
  CHECK(gpucache_open("/nonexistent/dataset", &dataset) == -1);
  CHECK(dataset == nullptr);
  CHECK(last_error() == "/nonexistent/dataset: no such dataset directory or shard file");
  CHECK(gpucache_open(nullptr, &dataset) == -1);
  CHECK(last_error() == "argument path is NULL");
  CHECK(gpucache_open("/tmp", nullptr) == -1);
  CHECK(gpucache_to_host(nullptr, nullptr, nullptr) == -1);
  CHECK(gpucache_dataset_rows(nullptr) == 0);
  gpucache_dataset_free(nullptr);
  gpucache_host_data_free(nullptr);
  gpucache_device_data_free(nullptr);
}

TEST_CASE_FIXTURE(Fixture, "device loads through the C ABI") {
  REQUIRE(fake_selected);
  fake_cuda_reset();
  CHECK(gpucache_cuda_available() == 1);
  gpucache_device_options options;
  gpucache_device_options_init(&options);
  CHECK(options.placement == GPUCACHE_PLACEMENT_DEVICE);
  CHECK(options.verify == 1);
  options.read_mode = GPUCACHE_READ_PREAD;
  gpucache_device_data* device = nullptr;
  REQUIRE(gpucache_to_device(dataset, 0, &options, &device) == 0);
  CHECK(gpucache_device_data_rows(device) == 16);
  CHECK(gpucache_device_data_bytes(device) == 4096 + 16 * 8);
  void* pointer = nullptr;
  gpucache_column info{};
  REQUIRE(gpucache_device_column(device, "label", &pointer, &info) == 0);
  CHECK(std::string(info.name) == "label");
  std::int64_t label;
  std::memcpy(&label, static_cast<std::byte*>(pointer) + 8 * 15, 8);  // fake device = host memory
  CHECK(label == 15 * 7 - 3);
  CHECK(gpucache_device_column(device, "caption", &pointer, &info) == -1);
  gpucache_device_data_free(device);
  CHECK(fake_cuda_stats().live_device_allocations == 0);

  options.placement = 7;
  CHECK(gpucache_to_device(dataset, 0, &options, &device) == -1);
  CHECK(last_error() == "placement: unknown value 7");
  fake_cuda_set_free_memory(10);
  CHECK(gpucache_to_device(dataset, 0, nullptr, &device) == -1);
  CHECK(last_error().find("GiB free on cuda:0") != std::string::npos);
}

TEST_CASE("a column whose shards end on pages is joined through the C ABI") {
  TempDir dir;
  // emb rows are 64 bytes: 64-row shards end on pages. label rows are 8 bytes: they do not.
  const std::vector<test::TestColumn> columns{test::f32_column("emb", 138, 3),
                                              test::i64_column("label", 138)};
  test::write_dataset(dir.path(), columns, {64, 64, 10});
  gpucache_dataset* dataset = nullptr;
  REQUIRE(gpucache_open(dir.path().c_str(), &dataset) == 0);
  gpucache_host_data* host = nullptr;
  REQUIRE(gpucache_to_host(dataset, nullptr, &host) == 0);
  const void* joined = nullptr;
  REQUIRE(gpucache_host_joined(host, "emb", &joined) == 0);
  REQUIRE(joined != nullptr);
  for (std::uint64_t row : {0, 63, 64, 100, 137}) {
    float value;
    std::memcpy(&value, static_cast<const std::byte*>(joined) + row * 64 + 4, 4);
    CHECK(value == test::test_value(row, 1));
  }
  REQUIRE(gpucache_host_joined(host, "label", &joined) == 0);
  CHECK(joined == nullptr);
  gpucache_host_data_free(host);
  gpucache_dataset_free(dataset);
}

TEST_CASE("row shapes and sequence columns through the C ABI") {
  REQUIRE(fake_selected);
  TempDir dir;
  const std::vector<test::TestColumn> columns{
      test::u8_image_column("image", 16, {3, 4, 5}), test::dense_f32_column("dense", 16, 7),
      test::i32_sequence_column("tokens", 16), test::i64_sequence_column("ids", 16)};
  test::write_dataset(dir.path(), columns, {5, 7, 4});
  gpucache_dataset* dataset = nullptr;
  REQUIRE(gpucache_open(dir.path().c_str(), &dataset) == 0);

  gpucache_column column{};
  REQUIRE(gpucache_dataset_column(dataset, 0, &column) == 0);
  CHECK(column.rank == 4);
  CHECK(column.dim == 5);
  CHECK(column.padded_dim == 5);
  CHECK(column.row_pitch_bytes == 60);
  gpucache_row_shape shape{};
  REQUIRE(gpucache_dataset_column_shape(dataset, 0, &shape) == 0);
  CHECK(shape.row_dims == 3);
  CHECK(shape.row_shape[0] == 3);
  CHECK(shape.row_shape[1] == 4);
  CHECK(shape.row_shape[2] == 5);
  CHECK(shape.row_shape[3] == 0);
  CHECK(shape.padded_dim == 5);
  CHECK(shape.row_pitch_bytes == 60);
  REQUIRE(gpucache_dataset_column_shape(dataset, 1, &shape) == 0);
  CHECK(shape.row_dims == 1);
  CHECK(shape.row_shape[0] == 7);
  CHECK(shape.row_pitch_bytes == 28);
  REQUIRE(gpucache_dataset_column(dataset, 2, &column) == 0);
  CHECK(column.kind == GPUCACHE_KIND_SEQUENCE);
  CHECK(std::string(column.dtype_name) == "i32");
  CHECK(column.rank == 2);
  REQUIRE(gpucache_dataset_column_shape(dataset, 2, &shape) == 0);
  CHECK(shape.row_dims == 0);
  CHECK(gpucache_dataset_column_shape(dataset, 4, &shape) == -1);
  CHECK(gpucache_dataset_column_shape(dataset, 0, nullptr) == -1);

  // Host: per-shard offsets and values, and one row's values.
  gpucache_host_data* host = nullptr;
  REQUIRE(gpucache_to_host(dataset, nullptr, &host) == 0);
  gpucache_sequence_piece piece{};
  REQUIRE(gpucache_host_get_sequence_piece(host, "ids", 1, &piece) == 0);
  CHECK(piece.rows == 7);
  CHECK(piece.first_row == 5);
  CHECK(piece.offsets[0] == 0);
  CHECK(piece.offsets[1] == test::id_count(5));
  std::int64_t id = 0;
  std::memcpy(&id, static_cast<const std::byte*>(piece.values) + piece.offsets[1] * 8, 8);
  CHECK(id == test::id_value(6, 0));
  CHECK(gpucache_host_get_sequence_piece(host, "image", 0, &piece) == -1);
  CHECK(last_error().find("is a tensor column") != std::string::npos);
  CHECK(gpucache_host_get_sequence_piece(host, "ids", 3, &piece) == -1);
  const void* values = nullptr;
  uint64_t count = 0;
  REQUIRE(gpucache_host_row_values(host, "tokens", 9, &values, &count) == 0);
  REQUIRE(count == test::token_count(9));
  std::int32_t token = 0;
  std::memcpy(&token, static_cast<const std::byte*>(values) + 3 * 4, 4);
  CHECK(token == test::token_value(9, 3));
  REQUIRE(gpucache_host_row_values(host, "tokens", 10, &values, &count) == 0);
  CHECK(count == 0);
  CHECK(gpucache_host_row_values(host, "dense", 0, &values, &count) == -1);
  const void* joined = &joined;
  REQUIRE(gpucache_host_joined(host, "tokens", &joined) == 0);
  CHECK(joined == nullptr);
  gpucache_host_data_free(host);

  // Device: values and rebased int64 offsets in the one allocation.
  fake_cuda_reset();
  gpucache_device_data* device = nullptr;
  REQUIRE(gpucache_to_device(dataset, 0, nullptr, &device) == 0);
  void* device_values = nullptr;
  int64_t* offsets = nullptr;
  REQUIRE(gpucache_device_sequence(device, "ids", &device_values, &offsets, &count) == 0);
  std::uint64_t total = 0;
  for (std::uint64_t r = 0; r < 16; ++r) total += test::id_count(r);
  CHECK(count == total);
  CHECK(offsets[0] == 0);  // fake device memory is host memory
  CHECK(offsets[16] == static_cast<int64_t>(total));
  std::memcpy(&id, static_cast<const std::byte*>(device_values) + offsets[13] * 8, 8);
  CHECK(id == test::id_value(13, 0));
  CHECK(gpucache_device_sequence(device, "image", &device_values, &offsets, &count) == -1);
  CHECK(last_error().find("not a sequence column") != std::string::npos);
  void* pointer = nullptr;
  REQUIRE(gpucache_device_column(device, "image", &pointer, &column) == 0);
  CHECK(column.row_pitch_bytes == 60);
  CHECK(static_cast<const std::uint8_t*>(pointer)[7 * 60 + 59] == test::image_value(7, 59));
  gpucache_device_data_free(device);
  CHECK(fake_cuda_stats().live_device_allocations == 0);
  gpucache_dataset_free(dataset);

  // The same from C.
  CHECK(c_sequence_values(dir.path().c_str(), "ids") == static_cast<long long>(total));
  CHECK(c_sequence_values(dir.path().c_str(), "image") == -1);
  CHECK(c_row_elements(dir.path().c_str(), 0) == 60);
  CHECK(c_row_elements(dir.path().c_str(), 3) == 1);
}

TEST_CASE("column names of up to 255 bytes (format 1.3) through the C ABI") {
  TempDir dir;
  std::string long_name;  // 220 bytes, multi-byte UTF-8
  while (long_name.size() < 220) long_name += "\xc3\xa9mbedding_";
  const std::string longest(255, 'l');
  const std::vector<test::TestColumn> columns{test::f32_column(long_name, 138, 3),
                                              test::i64_column(longest, 138)};
  test::write_dataset(dir.path(), columns, {64, 64, 10});
  gpucache_dataset* dataset = nullptr;
  REQUIRE(gpucache_open(dir.path().c_str(), &dataset) == 0);
  gpucache_column column{};
  REQUIRE(gpucache_dataset_column(dataset, 0, &column) == 0);
  CHECK(std::string(column.name) == long_name);
  REQUIRE(gpucache_dataset_column(dataset, 1, &column) == 0);
  CHECK(std::string(column.name) == longest);
  gpucache_host_data* host = nullptr;
  REQUIRE(gpucache_to_host(dataset, nullptr, &host) == 0);
  const void* joined = nullptr;
  REQUIRE(gpucache_host_joined(host, long_name.c_str(), &joined) == 0);
  REQUIRE(joined != nullptr);
  float value;
  std::memcpy(&value, static_cast<const std::byte*>(joined) + 100 * 64 + 4, 4);
  CHECK(value == test::test_value(100, 1));
  gpucache_host_data_free(host);
  gpucache_dataset_free(dataset);
}
