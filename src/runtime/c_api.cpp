// The C ABI (gpucache/gpucache.h) over the C++ runtime: handles wrap C++ values, and every
// exception becomes -1 plus a thread-local message, so no C++ exception crosses the boundary.
#include "gpucache/gpucache.h"

#include <algorithm>
#include <exception>
#include <new>
#include <span>
#include <string>

#include "gpucache/batch_order.hpp"
#include "gpucache/batch_stream.hpp"
#include "gpucache/runtime.hpp"

using namespace gpucache::runtime;

struct gpucache_dataset {
  Dataset value;
};
struct gpucache_host_data {
  HostData value;
};
struct gpucache_device_data {
  DeviceData value;
};
struct gpucache_stream {
  BatchStream value;
};
struct gpucache_batch {
  Batch value;
};

namespace {

thread_local std::string last_error;

template <typename F>
int guarded(F&& body) noexcept {
  try {
    body();
    return 0;
  } catch (const std::bad_alloc&) {
    last_error = "out of memory";
  } catch (const std::exception& error) {
    last_error = error.what();
  } catch (...) {
    last_error = "unknown error";
  }
  return -1;
}

void require(const void* pointer, const char* name) {
  if (!pointer) throw gpucache::Error("", "", std::string("argument ") + name + " is NULL");
}

void fill_column(const Column& column, gpucache_column* out) {
  out->name = column.name.c_str();
  out->kind = static_cast<int>(column.kind);
  out->dtype = static_cast<int>(column.dtype);
  out->dtype_name = dtype_name(column.dtype).data();  // static, NUL-terminated literals
  out->rank = column.rank();
  out->dim = column.dim();
  out->padded_dim = column.padded_dim;
  out->row_pitch_bytes = column.row_pitch_bytes();
}

void fill_shape(const Column& column, gpucache_row_shape* out) {
  *out = gpucache_row_shape{};
  out->row_dims = static_cast<uint32_t>(column.row_shape.size());
  for (std::size_t d = 0; d < column.row_shape.size() && d < GPUCACHE_MAX_ROW_DIMS; ++d)
    out->row_shape[d] = column.row_shape[d];
  out->padded_dim = column.padded_dim;
  out->row_pitch_bytes = column.row_pitch_bytes();
}

static_assert(GPUCACHE_MAX_ROW_DIMS == gpucache::kMaxRowDims);
// The C ABI's placement codes are Placement's values (placement_from_code reads them).
static_assert(GPUCACHE_PLACEMENT_DEVICE == static_cast<int>(gpucache::runtime::Placement::device));
static_assert(GPUCACHE_PLACEMENT_HOST_PINNED ==
              static_cast<int>(gpucache::runtime::Placement::host_pinned));

const HostPiece& piece_at(const gpucache_host_data* data, const char* column, size_t index) {
  const auto pieces = data->value.pieces(column);
  if (index >= pieces.size())
    throw gpucache::Error("", "column '" + std::string(column) + "'",
                          "piece " + std::to_string(index) +
                              " out of range: " + std::to_string(pieces.size()) + " pieces");
  return pieces[index];
}

template <typename Make>
int make_dataset(gpucache_dataset** out, Make&& make) noexcept {
  return guarded([&] {
    require(out, "out");
    *out = nullptr;
    *out = new gpucache_dataset{make()};
  });
}

// Column `index` of the dataset's selection; an index past it is an error naming both.
const Column& selected_column(const gpucache_dataset& dataset, size_t index) {
  const auto& columns = dataset.value.columns();
  if (index >= columns.size())
    throw gpucache::Error("", "column " + std::to_string(index),
                          "out of range: " + std::to_string(columns.size()) + " selected");
  return columns[index];
}

}  // namespace

extern "C" {

const char* gpucache_last_error(void) {
  return last_error.c_str();
}

int gpucache_cuda_available(void) {
  return cuda_available() ? 1 : 0;
}

int gpucache_open(const char* path, gpucache_dataset** out) {
  return make_dataset(out, [&] {
    require(path, "path");
    return Dataset::open(path);
  });
}

void gpucache_dataset_free(gpucache_dataset* dataset) {
  delete dataset;
}

uint64_t gpucache_dataset_total_rows(const gpucache_dataset* dataset) {
  return dataset ? dataset->value.total_rows() : 0;
}
uint64_t gpucache_dataset_rows(const gpucache_dataset* dataset) {
  return dataset ? dataset->value.rows() : 0;
}
uint64_t gpucache_dataset_row_begin(const gpucache_dataset* dataset) {
  return dataset ? dataset->value.row_begin() : 0;
}
size_t gpucache_dataset_shard_count(const gpucache_dataset* dataset) {
  return dataset ? dataset->value.shards().size() : 0;
}
size_t gpucache_dataset_column_count(const gpucache_dataset* dataset) {
  return dataset ? dataset->value.columns().size() : 0;
}

int gpucache_dataset_column(const gpucache_dataset* dataset, size_t index, gpucache_column* out) {
  return guarded([&] {
    require(dataset, "dataset");
    require(out, "out");
    fill_column(selected_column(*dataset, index), out);
  });
}

int gpucache_dataset_column_shape(const gpucache_dataset* dataset, size_t index,
                                  gpucache_row_shape* out) {
  return guarded([&] {
    require(dataset, "dataset");
    require(out, "out");
    fill_shape(selected_column(*dataset, index), out);
  });
}

int gpucache_select_columns(const gpucache_dataset* dataset, const char* const* names, size_t count,
                            gpucache_dataset** out) {
  return make_dataset(out, [&] {
    require(dataset, "dataset");
    if (count > 0) require(names, "names");
    std::vector<std::string> list;
    for (size_t i = 0; i < count; ++i) {
      require(names[i], "names[i]");
      list.emplace_back(names[i]);
    }
    return dataset->value.select_columns(list);
  });
}

int gpucache_select_rows(const gpucache_dataset* dataset, uint64_t begin, uint64_t end,
                         gpucache_dataset** out) {
  return make_dataset(out, [&] {
    require(dataset, "dataset");
    return dataset->value.select_rows(begin, end);
  });
}

int gpucache_for_rank(const gpucache_dataset* dataset, uint32_t rank, uint32_t world_size,
                      gpucache_dataset** out) {
  return make_dataset(out, [&] {
    require(dataset, "dataset");
    return dataset->value.for_rank(rank, world_size);
  });
}

void gpucache_host_options_init(gpucache_host_options* options) {
  if (!options) return;
  const HostOptions defaults;
  options->verify = defaults.verify ? 1 : 0;
  options->threads = defaults.threads;
}

int gpucache_to_host(const gpucache_dataset* dataset, const gpucache_host_options* options,
                     gpucache_host_data** out) {
  return guarded([&] {
    require(dataset, "dataset");
    require(out, "out");
    *out = nullptr;
    HostOptions host_options;
    if (options) {
      host_options.verify = options->verify != 0;
      host_options.threads = options->threads;
    }
    *out = new gpucache_host_data{dataset->value.to_host(host_options)};
  });
}

void gpucache_host_data_free(gpucache_host_data* data) {
  delete data;
}

uint64_t gpucache_host_data_rows(const gpucache_host_data* data) {
  return data ? data->value.rows() : 0;
}

int gpucache_host_piece_count(const gpucache_host_data* data, const char* column, size_t* count) {
  return guarded([&] {
    require(data, "data");
    require(column, "column");
    require(count, "count");
    *count = data->value.pieces(column).size();
  });
}

int gpucache_host_get_piece(const gpucache_host_data* data, const char* column, size_t index,
                            gpucache_host_piece* out) {
  return guarded([&] {
    require(data, "data");
    require(column, "column");
    require(out, "out");
    const HostPiece& piece = piece_at(data, column, index);
    out->data = piece.data;
    out->text_bytes = piece.text_bytes;
    out->rows = piece.rows;
    out->first_row = piece.first_row;
    out->shard_index = piece.shard_index;
  });
}

int gpucache_host_joined(const gpucache_host_data* data, const char* column,
                         const void** data_out) {
  return guarded([&] {
    require(data, "data");
    require(column, "column");
    require(data_out, "data_out");
    *data_out = data->value.joined(column);
  });
}

int gpucache_host_text(const gpucache_host_data* data, const char* column, uint64_t row,
                       const char** text, size_t* size) {
  return guarded([&] {
    require(data, "data");
    require(column, "column");
    require(text, "text");
    require(size, "size");
    const std::string_view value = data->value.text(column, row);
    *text = value.data();
    *size = value.size();
  });
}

int gpucache_host_get_sequence_piece(const gpucache_host_data* data, const char* column,
                                     size_t index, gpucache_sequence_piece* out) {
  return guarded([&] {
    require(data, "data");
    require(column, "column");
    require(out, "out");
    if (!data->value.column(column).variable_length())
      throw gpucache::Error("", "column '" + std::string(column) + "'",
                            "is a tensor column, not a text or sequence column");
    const HostPiece& piece = piece_at(data, column, index);
    out->offsets = reinterpret_cast<const uint64_t*>(piece.data);
    out->values = piece.values;
    out->rows = piece.rows;
    out->first_row = piece.first_row;
    out->shard_index = piece.shard_index;
  });
}

int gpucache_host_row_values(const gpucache_host_data* data, const char* column, uint64_t row,
                             const void** values, uint64_t* count) {
  return guarded([&] {
    require(data, "data");
    require(column, "column");
    require(values, "values");
    require(count, "count");
    const auto bytes = data->value.row_values(column, row);
    *values = bytes.data();
    *count = bytes.size() / gpucache::dtype_size(data->value.column(column).dtype);
  });
}

void gpucache_device_options_init(gpucache_device_options* options) {
  if (!options) return;
  const DeviceOptions defaults;
  options->placement = static_cast<int>(defaults.placement);
  options->read_mode = static_cast<int>(defaults.read_mode);
  options->verify = defaults.verify ? 1 : 0;
  options->threads = defaults.threads;
  options->staging_bytes = defaults.staging_bytes;
}

int gpucache_to_device(const gpucache_dataset* dataset, int device,
                       const gpucache_device_options* options, gpucache_device_data** out) {
  return guarded([&] {
    require(dataset, "dataset");
    require(out, "out");
    *out = nullptr;
    DeviceOptions device_options;
    if (options) {
      if (!gpucache::runtime::placement_from_code(options->placement))
        throw gpucache::Error("", "placement",
                              "unknown value " + std::to_string(options->placement));
      if (options->read_mode < GPUCACHE_READ_AUTOMATIC || options->read_mode > GPUCACHE_READ_PREAD)
        throw gpucache::Error("", "read_mode",
                              "unknown value " + std::to_string(options->read_mode));
      device_options.placement = static_cast<Placement>(options->placement);
      device_options.read_mode = static_cast<ReadMode>(options->read_mode);
      device_options.verify = options->verify != 0;
      device_options.threads = options->threads;
      device_options.staging_bytes = options->staging_bytes;
    }
    *out = new gpucache_device_data{dataset->value.to_device(device, device_options)};
  });
}

void gpucache_device_data_free(gpucache_device_data* data) {
  delete data;
}

uint64_t gpucache_device_data_rows(const gpucache_device_data* data) {
  return data ? data->value.rows() : 0;
}
uint64_t gpucache_device_data_bytes(const gpucache_device_data* data) {
  return data ? data->value.bytes() : 0;
}

int gpucache_device_column(const gpucache_device_data* data, const char* column, void** pointer,
                           gpucache_column* info) {
  return guarded([&] {
    require(data, "data");
    require(column, "column");
    const DeviceColumn& found = data->value.column(column);
    if (pointer) *pointer = found.data;
    if (info) fill_column(found.column, info);
  });
}

int gpucache_device_sequence(const gpucache_device_data* data, const char* column, void** values,
                             int64_t** offsets, uint64_t* count) {
  return guarded([&] {
    require(data, "data");
    require(column, "column");
    const DeviceColumn& found = data->value.column(column);
    if (found.column.kind != ColumnKind::sequence)
      throw gpucache::Error("", "column '" + std::string(column) + "'", "is not a sequence column");
    if (values) *values = found.data;
    if (offsets) *offsets = found.offsets;
    if (count) *count = found.values;
  });
}

}  // extern "C"

namespace {

OrderOptions order_options(const gpucache_order_options* options) {
  require(options, "options");
  OrderOptions out;
  out.rows = options->rows;
  out.batch_size = options->batch_size;
  out.shuffle = options->shuffle != 0;
  out.seed = options->seed;
  out.epoch = options->epoch;
  out.rank = options->rank;
  out.world_size = options->world_size;
  out.drop_last = options->drop_last != 0;
  out.block_rows = options->block_rows;
  out.window_blocks = options->window_blocks;
  return out;
}

}  // namespace

void gpucache_order_options_init(gpucache_order_options* options) {
  if (!options) return;
  *options = gpucache_order_options{};
  options->batch_size = 1;
  options->shuffle = 1;
  options->world_size = 1;
  options->drop_last = 1;
  options->window_blocks = 1;
}

int gpucache_order_batches(const gpucache_order_options* options, uint64_t* batches) {
  return guarded([&] {
    require(batches, "batches");
    *batches = BatchOrder(order_options(options)).batches();
  });
}

int gpucache_order_batch(const gpucache_order_options* options, uint64_t batch, uint64_t* rows,
                         uint64_t capacity, uint64_t* count) {
  return guarded([&] {
    require(count, "count");
    const BatchOrder order(order_options(options));
    const std::uint64_t wanted = order.batch_rows(batch);
    if (wanted > 0) require(rows, "rows");
    order.batch(batch,
                std::span<std::uint64_t>(
                    rows, static_cast<std::size_t>(std::min<std::uint64_t>(capacity, wanted))));
    *count = wanted;
  });
}

int gpucache_permute(uint64_t size, uint64_t key, uint64_t index, uint64_t* out) {
  return guarded([&] {
    require(out, "out");
    if (index >= size)
      throw gpucache::Error(
          "", "permute",
          "index " + std::to_string(index) + " is not below size " + std::to_string(size));
    *out = Permutation(size, key)(index);
  });
}

void gpucache_stream_options_init(gpucache_stream_options* options) {
  if (!options) return;
  *options = gpucache_stream_options{};
  gpucache_order_options_init(&options->order);
  options->device = -1;
  options->prefetch = 4;
  options->verify = 1;
}

int gpucache_stream_open(const gpucache_dataset* dataset, const gpucache_stream_options* options,
                         gpucache_stream** out) {
  return guarded([&] {
    require(dataset, "dataset");
    require(out, "out");
    gpucache_stream_options defaults;
    gpucache_stream_options_init(&defaults);
    const gpucache_stream_options& given = options ? *options : defaults;
    StreamOptions converted;
    converted.order = order_options(&given.order);
    converted.device = given.device;
    converted.prefetch = given.prefetch;
    converted.threads = given.threads;
    converted.verify = given.verify != 0;
    *out = new gpucache_stream{BatchStream(dataset->value, converted)};
  });
}

void gpucache_stream_free(gpucache_stream* stream) {
  delete stream;
}

uint64_t gpucache_stream_batches(const gpucache_stream* stream) {
  return stream ? stream->value.batches() : 0;
}

void gpucache_stream_position(const gpucache_stream* stream, uint64_t* epoch, uint64_t* batch) {
  if (epoch) *epoch = stream ? stream->value.epoch() : 0;
  if (batch) *batch = stream ? stream->value.position() : 0;
}

int gpucache_stream_seek(gpucache_stream* stream, uint64_t epoch, uint64_t batch) {
  return guarded([&] {
    require(stream, "stream");
    stream->value.seek(epoch, batch);
  });
}

int gpucache_stream_next(gpucache_stream* stream, gpucache_batch** out) {
  return guarded([&] {
    require(stream, "stream");
    require(out, "out");
    *out = nullptr;
    if (auto batch = stream->value.next()) *out = new gpucache_batch{std::move(*batch)};
  });
}

void gpucache_batch_free(gpucache_batch* batch) {
  delete batch;
}

uint64_t gpucache_batch_rows(const gpucache_batch* batch) {
  return batch ? batch->value.rows() : 0;
}

const uint64_t* gpucache_batch_row_indices(const gpucache_batch* batch) {
  return batch ? batch->value.row_indices().data() : nullptr;
}

int gpucache_batch_column(const gpucache_batch* batch, const char* column, void** data,
                          uint64_t* bytes, int64_t** offsets, uint64_t* values) {
  return guarded([&] {
    require(batch, "batch");
    require(column, "column");
    const BatchColumn& found = batch->value.column(column);
    if (data) *data = found.data;
    if (bytes) *bytes = found.bytes;
    if (offsets) *offsets = found.offsets;
    if (values) *values = found.values;
  });
}

int gpucache_batch_wait(const gpucache_batch* batch, void* cuda_stream) {
  return guarded([&] {
    require(batch, "batch");
    batch->value.wait(cuda_stream);
  });
}
