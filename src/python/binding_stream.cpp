// gpucache._gpucache, the streaming half of the runtime reader: the batch order (NativeOrder,
// resume_batch), so Python keeps no copy of it, and the prefetching batch stream (NativeStream)
// with its batches (NativeBatch).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "binding_arrays.hpp"
#include "binding_steps.hpp"
#include "gpucache/batch_order.hpp"
#include "gpucache/batch_stream.hpp"
#include "gpucache/common/parallel.hpp"
#include "gpucache/error.hpp"

namespace gpucache::python {

using namespace gpucache::runtime;

namespace {

// OrderOptions from the binding's positional arguments (NativeOrder and batch_order_rows).
OrderOptions order_options(std::uint64_t rows, std::uint64_t batch_size, bool shuffle,
                           std::uint64_t seed, std::uint64_t epoch, std::uint32_t rank,
                           std::uint32_t world_size, bool drop_last, bool pad,
                           std::uint64_t block_rows, std::uint64_t window_blocks) {
  OrderOptions options;
  options.rows = rows;
  options.batch_size = batch_size;
  options.shuffle = shuffle;
  options.seed = seed;
  options.epoch = epoch;
  options.rank = rank;
  options.world_size = world_size;
  options.drop_last = drop_last;
  options.pad = pad;
  options.block_rows = block_rows;
  options.window_blocks = window_blocks;
  return options;
}

// Arrays over a column of a stream batch, in host or device memory, kept alive by the batch.
nb::ndarray<> batch_array(const Batch& batch, const void* data, std::vector<std::size_t> shape,
                          DType dtype, Wire wire) {
  const bool device = batch.device() >= 0;
  return make_array(data, shape, dtype, keep_alive(batch.owner()),
                    device ? nb::device::cuda::value : nb::device::cpu::value,
                    device ? batch.device() : 0, wire);
}

}  // namespace

// NativeOrder, resume_batch and batch_order_rows: the runtime's batch order, so Python keeps no
// copy of it.
void bind_batch_order(nb::module_& m) {
  nb::class_<BatchOrder>(m, "NativeOrder")
      .def(
          "__init__",
          [](BatchOrder* self, std::uint64_t rows, std::uint64_t batch_size, bool shuffle,
             std::uint64_t seed, std::uint64_t epoch, std::uint32_t rank, std::uint32_t world_size,
             bool drop_last, bool pad, std::uint64_t block_rows, std::uint64_t window_blocks) {
            new (self)
                BatchOrder(order_options(rows, batch_size, shuffle, seed, epoch, rank, world_size,
                                         drop_last, pad, block_rows, window_blocks));
          },
          nb::arg("rows"), nb::arg("batch_size"), nb::arg("shuffle"), nb::arg("seed"),
          nb::arg("epoch"), nb::arg("rank"), nb::arg("world_size"), nb::arg("drop_last"),
          nb::arg("pad"), nb::arg("block_rows"), nb::arg("window_blocks"))
      .def_prop_ro("batches", &BatchOrder::batches)
      .def_prop_ro("rank_rows", &BatchOrder::rank_rows)
      .def("batch_rows", &BatchOrder::batch_rows, nb::arg("batch"))
      .def(
          "rows",
          [](const BatchOrder& order, std::uint64_t first, std::uint64_t end, bool numpy) {
            // Batches [first, end) back to back, as int64 on the host, computed by the CPU
            // threads without the GIL (every batch but the last is full).
            end = std::min(end, order.batches());
            first = std::min(first, end);
            const std::uint64_t size = order.options().batch_size;
            std::uint64_t count = 0;
            if (first < end) count = (end - 1 - first) * size + order.batch_rows(end - 1);
            auto* memory = new std::byte[std::max<std::uint64_t>(count, 1) * 8];
            auto* out = reinterpret_cast<std::uint64_t*>(memory);
            {
              nb::gil_scoped_release release;
              gpucache::detail::parallel_for(
                  end - first, 0, std::max<std::uint64_t>(1, 65536 / size),
                  [&](std::uint64_t begin, std::uint64_t stop) {
                    for (std::uint64_t b = begin; b < stop; ++b)
                      order.batch(first + b, {out + b * size, order.batch_rows(first + b)});
                  });
            }
            const Wire wire{numpy, false};
            return to_python(make_array(memory, {static_cast<std::size_t>(count)}, DType::i64,
                                        owning(memory), nb::device::cpu::value, 0, wire),
                             numpy);
          },
          nb::arg("first"), nb::arg("end"), nb::arg("numpy") = false,
          "The rows of batches [first, end) back to back: an int64 array on the host");
  m.def("resume_batch", &resume_batch, nb::arg("saved_batch"), nb::arg("saved_batch_size"),
        nb::arg("saved_world_size"), nb::arg("batch_size"), nb::arg("world_size"),
        "The batch to resume at (gpucache/batch_order.hpp resume_batch)");
  m.def(
      "batch_order_rows",
      [](std::uint64_t rows, std::uint64_t batch_size, bool shuffle, std::uint64_t seed,
         std::uint64_t epoch, std::uint32_t rank, std::uint32_t world_size, bool drop_last,
         std::uint64_t block_rows, std::uint64_t window_blocks, std::uint64_t batch) {
        // pad stays the C++ default (true), as this hook always checked the runtime's own order.
        return BatchOrder(order_options(rows, batch_size, shuffle, seed, epoch, rank, world_size,
                                        drop_last, OrderOptions{}.pad, block_rows, window_blocks))
            .batch(batch);
      },
      nb::arg("rows"), nb::arg("batch_size"), nb::arg("shuffle"), nb::arg("seed"), nb::arg("epoch"),
      nb::arg("rank"), nb::arg("world_size"), nb::arg("drop_last"), nb::arg("block_rows"),
      nb::arg("window_blocks"), nb::arg("batch"),
      "The runtime's rows of one batch (gpucache/batch_order.hpp), to check the Python order");
}

// NativeBatch: one batch of the order (batch_order.hpp).
void bind_batch(nb::module_& m) {
  nb::class_<Batch>(m, "NativeBatch")
      .def_prop_ro("rows", &Batch::rows)
      .def_prop_ro("epoch", &Batch::epoch)
      .def_prop_ro("index", &Batch::index)
      .def_prop_ro("device", &Batch::device)
      .def(
          "row_indices",
          [](const Batch& batch, bool numpy) {
            const Wire wire{numpy, false};
            const auto array =
                make_array(batch.row_indices().data(), {static_cast<std::size_t>(batch.rows())},
                           DType::i64, keep_alive(batch.owner()), nb::device::cpu::value, 0, wire);
            return to_python(array, numpy);
          },
          nb::arg("numpy") = false)
      .def(
          "tensor",
          [](const Batch& batch, const std::string& name, bool numpy, bool unsigned_as_signed) {
            const Wire wire{numpy, unsigned_as_signed};
            const BatchColumn& column = batch.column(name);
            if (column.column.variable_length())
              throw gpucache::Error("", "column '" + name + "'", "is not a tensor column");
            return to_python(
                batch_array(batch, column.data, stored_shape(batch.rows(), column.column),
                            column.column.dtype, wire),
                numpy);
          },
          nb::arg("name"), nb::arg("numpy") = false, nb::arg("unsigned_as_signed") = false)
      .def(
          "sequence",
          [](const Batch& batch, const std::string& name, bool numpy, bool unsigned_as_signed) {
            const Wire wire{numpy, unsigned_as_signed};
            const BatchColumn& column = batch.column(name);
            sequence_column(column.column);
            const auto values =
                batch_array(batch, column.data, {static_cast<std::size_t>(column.values)},
                            column.column.dtype, wire);
            const auto offsets =
                batch_array(batch, column.offsets, {static_cast<std::size_t>(batch.rows() + 1)},
                            DType::i64, wire);
            return nb::make_tuple(to_python(values, numpy), to_python(offsets, numpy));
          },
          nb::arg("name"), nb::arg("numpy") = false, nb::arg("unsigned_as_signed") = false)
      .def("texts",
           [](const Batch& batch, const std::string& name) {
             const BatchColumn& column = batch.column(name);
             if (column.column.kind != gpucache::ColumnKind::text)
               throw gpucache::Error("", "column '" + name + "'", "is not a text column");
             nb::list out;
             for (std::uint64_t i = 0; i < batch.rows(); ++i) {
               const auto* text = reinterpret_cast<const char*>(column.data) + column.offsets[i];
               out.append(nb::str(
                   text, static_cast<std::size_t>(column.offsets[i + 1] - column.offsets[i])));
             }
             return out;
           })
      .def(
          "wait",
          [](const Batch& batch, std::uintptr_t stream) {
            batch.wait(reinterpret_cast<void*>(stream));
          },
          nb::arg("stream"));
}

// NativeStream: the prefetching batch stream (batch_stream.hpp).
void bind_stream(nb::module_& m) {
  nb::class_<BatchStream>(m, "NativeStream")
      .def(
          "__init__",
          [](BatchStream* self, const Dataset& dataset, std::uint64_t batch_size, bool shuffle,
             std::uint64_t seed, std::uint64_t epoch, std::uint32_t rank, std::uint32_t world_size,
             bool drop_last, std::uint64_t block_rows, std::uint64_t window_blocks, int device,
             unsigned prefetch, unsigned threads, bool verify, bool pad, std::uint64_t stride,
             unsigned prefetch_shards) {
            StreamOptions options;
            options.order.batch_size = batch_size;
            options.order.shuffle = shuffle;
            options.order.seed = seed;
            options.order.epoch = epoch;
            options.order.rank = rank;
            options.order.world_size = world_size;
            options.order.drop_last = drop_last;
            options.order.block_rows = block_rows;
            options.order.window_blocks = window_blocks;
            options.order.pad = pad;
            options.device = device;
            options.prefetch = prefetch;
            options.threads = threads;
            options.verify = verify;
            options.stride = stride;
            options.prefetch_shards = prefetch_shards;
            nb::gil_scoped_release release;
            new (self) BatchStream(dataset, options);
          },
          nb::arg("dataset"), nb::arg("batch_size"), nb::arg("shuffle"), nb::arg("seed"),
          nb::arg("epoch"), nb::arg("rank"), nb::arg("world_size"), nb::arg("drop_last"),
          nb::arg("block_rows"), nb::arg("window_blocks"), nb::arg("device"), nb::arg("prefetch"),
          nb::arg("threads"), nb::arg("verify"), nb::arg("pad") = true, nb::arg("stride") = 1,
          // The default is StreamOptions' own (batch_stream.hpp), stated once.
          nb::arg("prefetch_shards") = StreamOptions{}.prefetch_shards)
      .def_prop_ro("batches", &BatchStream::batches)
      .def_prop_ro("epoch", &BatchStream::epoch)
      .def_prop_ro("position", &BatchStream::position)
      .def("seek", &BatchStream::seek, nb::arg("epoch"), nb::arg("batch"),
           nb::call_guard<nb::gil_scoped_release>())
      .def("next", &BatchStream::next, nb::call_guard<nb::gil_scoped_release>())
      .def("stats", [](const BatchStream& stream) {
        const StreamStats stats = stream.stats();
        nb::dict out;
        out["batches"] = stats.batches;
        out["bytes_gathered"] = stats.bytes_gathered;
        out["bytes_verified"] = stats.bytes_verified;
        out["peak_blocks"] = stats.peak_blocks;
        out["shards_open"] = stats.shards_open;
        return out;
      });
}

}  // namespace gpucache::python
