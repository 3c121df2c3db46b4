// gpucache._gpucache: the runtime reader for Python. Columns come back as DLPack-capable arrays
// (nanobind ndarrays) whose owner capsule holds the runtime's owner token, so a mapping or device
// allocation lives exactly as long as the last tensor made from it. The pure-Python package
// (src/python/gpucache) turns them into torch tensors or numpy arrays.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "binding_tools.hpp"
#include "gpucache/batch_order.hpp"
#include "gpucache/batch_stream.hpp"
#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/common/parallel.hpp"
#include "gpucache/runtime.hpp"
#include "gpucache/shard/shard_layout.hpp"

namespace nb = nanobind;
using namespace gpucache::runtime;
using gpucache::DType;

namespace {

// How element types travel over DLPack, for consumers that lack some of them.
struct Wire {
  bool bf16_as_u16 = false;         // numpy has no bfloat16
  bool unsigned_as_signed = false;  // PyTorch before 2.3 has no uint16/32/64: same bits, signed
};

// bool and the fp8 codes always travel as u8: the Python layer views them as bool or fp8, which
// older PyTorch cannot import from DLPack.
nb::dlpack::dtype wire_dtype(DType dtype, Wire wire) {
  auto make = [](gpucache::DLPackCode code, std::size_t bytes) {
    return nb::dlpack::dtype{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bytes * 8),
                             1};
  };
  using gpucache::DLPackCode;
  const gpucache::DTypeInfo* info = gpucache::dtype_info(dtype);
  if (info == nullptr || info->dlpack == DLPackCode::none || info->dlpack == DLPackCode::bool_)
    return make(DLPackCode::uint, 1);
  if (info->dlpack == DLPackCode::bfloat && wire.bf16_as_u16) return make(DLPackCode::uint, 2);
  if (info->dlpack == DLPackCode::uint && info->size > 1 && wire.unsigned_as_signed)
    return make(DLPackCode::int_, info->size);
  return make(info->dlpack, info->size);
}

// LoadStats as the dict Dataset.load_stats returns, for host and device loads alike.
nb::dict stats_dict(const LoadStats& stats) {
  nb::dict out;
  out["bytes_copied"] = stats.bytes_copied;
  out["bytes_verified"] = stats.bytes_verified;
  out["shards_registered"] = stats.shards_registered;
  out["shards_staged"] = stats.shards_staged;
  out["seconds"] = stats.seconds;
  return out;
}

// A capsule that keeps `owner` (a mapping or device allocation) alive while an array uses it.
nb::capsule keep_alive(const std::shared_ptr<const void>& owner) {
  auto* keep = new std::shared_ptr<const void>(owner);
  return nb::capsule(keep, [](void* pointer) noexcept {
    delete static_cast<std::shared_ptr<const void>*>(pointer);
  });
}

// A capsule owning memory this module allocated (arrays computed here, not views).
nb::capsule owning(std::byte* memory) {
  return nb::capsule(memory,
                     [](void* pointer) noexcept { delete[] static_cast<std::byte*>(pointer); });
}

nb::ndarray<> make_array(const void* data, const std::vector<std::size_t>& shape, DType dtype,
                         nb::capsule owner, int device_type, int device_id, Wire wire) {
  return nb::ndarray<>(const_cast<void*>(data), shape.size(), shape.data(), owner, nullptr,
                       wire_dtype(dtype, wire), device_type, device_id);
}

// The stored shape of a tensor column's rows: [rows, *row_shape] with the innermost dimension
// padded_dim ([rows] for one value per row).
std::vector<std::size_t> stored_shape(std::uint64_t rows, const Column& column) {
  std::vector<std::size_t> shape{static_cast<std::size_t>(rows)};
  for (std::size_t d = 0; d < column.row_shape.size(); ++d)
    shape.push_back(static_cast<std::size_t>(d + 1 < column.row_shape.size() ? column.row_shape[d]
                                                                             : column.padded_dim));
  return shape;
}

// A tensor column's stored rows over `data`, kept alive by `owner`.
nb::ndarray<> tensor_array(const void* data, std::uint64_t rows, const Column& column,
                           const std::shared_ptr<const void>& owner, int device_type, int device_id,
                           Wire wire) {
  return make_array(data, stored_shape(rows, column), column.dtype, keep_alive(owner), device_type,
                    device_id, wire);
}

// numpy gets its own arrays; others a DLPack-capable array (torch.utils.dlpack.from_dlpack).
nb::object to_python(const nb::ndarray<>& array, bool numpy) {
  return numpy ? nb::cast(nb::ndarray<nb::numpy>(array)) : nb::cast(array);
}

const Column& sequence_column(const Column& column) {
  if (column.kind != gpucache::ColumnKind::sequence)
    throw gpucache::Error("", "column '" + column.name + "'", "is not a sequence column");
  return column;
}

// A sequence column of host data as (values, offsets): its selected values, concatenated across
// shards (a view of the mapping when they lie in one shard, else one copy), and rows + 1 int64
// offsets rebased to them. The copies run without the GIL.
nb::tuple host_sequence(const HostData& data, const std::string& name, bool numpy,
                        bool unsigned_as_signed) {
  const Wire wire{numpy, unsigned_as_signed};
  const Column& column = sequence_column(data.column(name));
  const std::uint64_t itemsize = gpucache::dtype_size(column.dtype);
  const auto pieces = data.pieces(name);
  auto offset = [](const HostPiece& piece, std::uint64_t i) {
    std::uint64_t value = 0;
    std::memcpy(&value, piece.data + i * 8, 8);
    return value;
  };
  std::uint64_t total = 0;
  for (const HostPiece& piece : pieces) total += offset(piece, piece.rows) - offset(piece, 0);
  std::unique_ptr<std::byte[]> offsets(new std::byte[(data.rows() + 1) * 8]);
  std::unique_ptr<std::byte[]> joined;  // only when the values lie in several shards
  if (pieces.size() != 1) joined.reset(new std::byte[std::max<std::uint64_t>(total * itemsize, 8)]);
  {
    nb::gil_scoped_release release;
    std::uint64_t base = 0;
    for (const HostPiece& piece : pieces) {
      const std::uint64_t first = offset(piece, 0), count = offset(piece, piece.rows) - first;
      for (std::uint64_t i = 0; i < piece.rows; ++i) {
        const auto value = static_cast<std::int64_t>(base + offset(piece, i) - first);
        std::memcpy(offsets.get() + (piece.first_row + i) * 8, &value, 8);
      }
      if (joined && count)
        std::memcpy(joined.get() + base * itemsize, piece.values + first * itemsize,
                    count * itemsize);
      base += count;
    }
    const auto end = static_cast<std::int64_t>(total);
    std::memcpy(offsets.get() + data.rows() * 8, &end, 8);
  }
  const std::vector<std::size_t> values_shape{static_cast<std::size_t>(total)};
  nb::ndarray<> values;
  if (joined) {
    std::byte* memory = joined.get();
    values = make_array(memory, values_shape, column.dtype, owning(joined.release()),
                        nb::device::cpu::value, 0, wire);
  } else {
    const HostPiece& piece = pieces.front();
    values = make_array(piece.values + offset(piece, 0) * itemsize, values_shape, column.dtype,
                        keep_alive(data.owner()), nb::device::cpu::value, 0, wire);
  }
  std::byte* memory = offsets.get();
  const auto offsets_array =
      make_array(memory, {static_cast<std::size_t>(data.rows() + 1)}, DType::i64,
                 owning(offsets.release()), nb::device::cpu::value, 0, wire);
  return nb::make_tuple(to_python(values, numpy), to_python(offsets_array, numpy));
}

nb::dict column_dict(const Column& column) {
  nb::dict out;
  out["name"] = column.name;
  out["kind"] = std::string(column_kind_name(column.kind));
  out["dtype"] = std::string(dtype_name(column.dtype));
  out["rank"] = column.rank();
  nb::list row_shape;
  for (const std::uint64_t extent : column.row_shape) row_shape.append(extent);
  out["row_shape"] = row_shape;
  out["dim"] = column.dim();
  out["padded_dim"] = column.padded_dim;
  out["row_pitch_bytes"] = column.row_pitch_bytes();
  return out;
}

nb::list column_list(const std::vector<Column>& columns) {
  nb::list out;
  for (const auto& column : columns) out.append(column_dict(column));
  return out;
}

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

Placement placement_of(const std::string& text) {
  if (const auto placement = gpucache::runtime::parse_placement(text)) return *placement;
  throw gpucache::Error("", "placement",
                        "'" + text + "' is not one of " + gpucache::runtime::placement_names());
}

ReadMode parse_read_mode(const std::string& text) {
  if (text == "auto") return ReadMode::automatic;
  if (text == "mmap") return ReadMode::register_mmap;
  if (text == "pread") return ReadMode::pread;
  throw gpucache::Error("", "read_mode", "'" + text + "' is not one of auto, mmap, pread");
}

// Arrays over a column of a stream batch, in host or device memory, kept alive by the batch.
nb::ndarray<> batch_array(const Batch& batch, const void* data, std::vector<std::size_t> shape,
                          DType dtype, Wire wire) {
  const bool device = batch.device() >= 0;
  return make_array(data, shape, dtype, keep_alive(batch.owner()),
                    device ? nb::device::cuda::value : nb::device::cpu::value,
                    device ? batch.device() : 0, wire);
}

// gpucache.Error and the translator that raises it for gpucache::Error.
void bind_error(nb::module_& m) {
  // gpucache.Error, a RuntimeError carrying the parts of the message as attributes: file,
  // location and cause (None where the error did not come from the library).
  static PyObject* error_type =
      PyErr_NewException("gpucache._gpucache.Error", PyExc_RuntimeError, nullptr);
  for (const char* name : {"file", "location", "cause"})
    PyObject_SetAttrString(error_type, name, Py_None);
  m.attr("Error") = nb::handle(error_type);
  nb::register_exception_translator(
      [](const std::exception_ptr& thrown, void*) {
        try {
          std::rethrow_exception(thrown);
        } catch (const gpucache::Error& error) {
          // File names need not be UTF-8: undecodable bytes are replaced, never an error here.
          auto text = [](const std::string& part) -> nb::object {
            if (part.empty()) return nb::none();
            return nb::steal(
                PyUnicode_DecodeUTF8(part.data(), static_cast<Py_ssize_t>(part.size()), "replace"));
          };
          nb::object value = nb::steal(PyObject_CallOneArg(error_type, text(error.what()).ptr()));
          if (!value.is_valid()) return;  // the call's own error is raised
          value.attr("file") = text(error.file());
          value.attr("location") = text(error.location());
          value.attr("cause") = text(error.cause());
          PyErr_SetObject(error_type, value.ptr());
        }
      },
      nullptr);
}

// What the runtime found: CUDA, its library, the placements, and the like.
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

void bind_runtime_info(nb::module_& m) {
  m.def("cuda_available", &cuda_available,
        "True when a CUDA runtime library loads and sees at least one GPU");
  m.def(
      "placements",
      [] {
        std::vector<std::string> names;
        for (const auto placement : gpucache::runtime::placements())
          names.emplace_back(placement_name(placement));
        return names;
      },
      "The placement names to_device takes (the runtime's: device, host_pinned)");
  m.def("cuda_library", &cuda_library, "The libcudart file the runtime loaded");
  m.def(
      "is_provenance_column",
      [](const std::string& name) { return gpucache::shard::is_provenance_column(name); },
      "True for the packer's provenance columns (@source, @source_row), which load and stream "
      "leave out unless named");
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

// NativeOrder and resume_batch: the runtime's batch order, so Python keeps no copy of it.
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
}

// HostData: a dataset mapped on the host, its columns as zero-copy views.
void bind_host_data(nb::module_& m) {
  nb::class_<HostData>(m, "HostData")
      .def_prop_ro("rows", &HostData::rows)
      .def("columns", [](const HostData& data) { return column_list(data.columns()); })
      .def(
          "pieces",
          [](const HostData& data, const std::string& name, bool numpy, bool unsigned_as_signed) {
            const Column& column = data.column(name);
            nb::list out;
            for (const HostPiece& piece : data.pieces(name))
              out.append(to_python(
                  tensor_array(piece.data, piece.rows, column, data.owner(), nb::device::cpu::value,
                               0, Wire{numpy, unsigned_as_signed}),
                  numpy));
            return out;
          },
          nb::arg("name"), nb::arg("numpy") = false, nb::arg("unsigned_as_signed") = false,
          "Zero-copy views of a tensor column's stored rows, one per shard, in row order")
      .def(
          "joined",
          [](const HostData& data, const std::string& name, bool numpy,
             bool unsigned_as_signed) -> nb::object {
            const Column& column = data.column(name);
            const std::byte* joined = data.joined(name);
            if (joined == nullptr) return nb::none();
            return to_python(
                tensor_array(joined, data.rows(), column, data.owner(), nb::device::cpu::value, 0,
                             Wire{numpy, unsigned_as_signed}),
                numpy);
          },
          nb::arg("name"), nb::arg("numpy") = false, nb::arg("unsigned_as_signed") = false,
          "A zero-copy view of all selected rows of a tensor column, or None when its shards' "
          "parts could not be mapped side by side")
      .def("sequence", &host_sequence, nb::arg("name"), nb::arg("numpy") = false,
           nb::arg("unsigned_as_signed") = false,
           "A sequence column as (values, offsets): the selected values concatenated across "
           "shards (a view of the mapping when they lie in one shard, else a copy) and rows + 1 "
           "int64 offsets rebased to them")
      .def(
          "texts",
          [](const HostData& data, const std::string& name,
             std::optional<std::vector<std::uint64_t>> rows) {
            nb::list out;
            auto append = [&](std::uint64_t row) {
              const std::string_view text = data.text(name, row);
              PyObject* string = PyUnicode_DecodeUTF8(
                  text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
              if (!string) throw nb::python_error();
              out.append(nb::steal(string));
            };
            if (rows)
              for (const std::uint64_t row : *rows) append(row);
            else
              for (std::uint64_t row = 0; row < data.rows(); ++row) append(row);
            return out;
          },
          nb::arg("name"), nb::arg("rows") = nb::none())
      .def("stats", [](const HostData& data) { return stats_dict(data.stats()); })
      .def("mapped_ranges", [](const HostData& data) {
        nb::list out;
        for (const MappedRange& range : data.mapped_ranges())
          out.append(
              nb::make_tuple(reinterpret_cast<std::uintptr_t>(range.data), range.size, range.path));
        return out;
      });
}

// DeviceData: a dataset loaded into one allocation (device or pinned host).
void bind_device_data(nb::module_& m) {
  nb::class_<DeviceData>(m, "DeviceData")
      .def_prop_ro("rows", &DeviceData::rows)
      .def_prop_ro("bytes", &DeviceData::bytes)
      .def_prop_ro("device", &DeviceData::device)
      .def_prop_ro("placement",
                   [](const DeviceData& data) {
                     return std::string(gpucache::runtime::placement_name(data.placement()));
                   })
      .def("columns",
           [](const DeviceData& data) {
             nb::list out;
             for (const DeviceColumn& column : data.columns())
               out.append(column_dict(column.column));
             return out;
           })
      .def(
          "tensor",
          [](const DeviceData& data, const std::string& name, bool unsigned_as_signed) {
            const DeviceColumn& column = data.column(name);
            if (column.column.kind != gpucache::ColumnKind::tensor)
              throw gpucache::Error("", "column '" + name + "'", "is not a tensor column");
            return tensor_array(column.data, data.rows(), column.column, data.owner(),
                                nb::device::cuda::value, data.device(),
                                Wire{false, unsigned_as_signed});
          },
          nb::arg("name"), nb::arg("unsigned_as_signed") = false)
      .def(
          "sequence",
          [](const DeviceData& data, const std::string& name, bool unsigned_as_signed) {
            const DeviceColumn& column = data.column(name);
            sequence_column(column.column);
            const Wire wire{false, unsigned_as_signed};
            const auto values = make_array(column.data, {static_cast<std::size_t>(column.values)},
                                           column.column.dtype, keep_alive(data.owner()),
                                           nb::device::cuda::value, data.device(), wire);
            const auto offsets =
                make_array(column.offsets, {static_cast<std::size_t>(data.rows() + 1)}, DType::i64,
                           keep_alive(data.owner()), nb::device::cuda::value, data.device(), wire);
            return nb::make_tuple(values, offsets);
          },
          nb::arg("name"), nb::arg("unsigned_as_signed") = false,
          "A sequence column as (values, offsets) in the device allocation: the selected values "
          "and rows + 1 int64 offsets rebased to them")
      .def("stats", [](const DeviceData& data) { return stats_dict(data.stats()); });
}

// NativeDataset: an opened dataset, and its loads.
void bind_dataset(nb::module_& m) {
  nb::class_<Dataset>(m, "NativeDataset")
      .def_static(
          "open",
          [](const std::string& path, const std::string& cache_dir, std::uint64_t cache_limit) {
            return Dataset::open(path, gpucache::runtime::OpenOptions{cache_dir, cache_limit});
          },
          nb::arg("path"), nb::arg("cache_dir") = "", nb::arg("cache_limit") = 0,
          nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("path", &Dataset::path)
      .def_prop_ro("local_path", &Dataset::local_path)
      .def_prop_ro("total_rows", &Dataset::total_rows)
      .def_prop_ro("row_begin", &Dataset::row_begin)
      .def_prop_ro("row_end", &Dataset::row_end)
      .def_prop_ro("rows", &Dataset::rows)
      .def("columns", [](const Dataset& dataset) { return column_list(dataset.columns()); })
      .def("all_columns", [](const Dataset& dataset) { return column_list(dataset.all_columns()); })
      .def("shards",
           [](const Dataset& dataset) {
             nb::list out;
             for (const ShardInfo& shard : dataset.shards()) {
               nb::dict info;
               info["path"] = shard.path;
               info["shard_index"] = shard.shard_index;
               info["first_row"] = shard.first_row;
               info["rows"] = shard.rows;
               info["file_size"] = shard.file_size;
               info["header_hash"] = hex(shard.header_hash);
               out.append(info);
             }
             return out;
           })
      .def("needed_shards", &Dataset::needed_shards)
      .def("device_bytes_bound", &Dataset::device_bytes_bound)
      .def("select_columns", &Dataset::select_columns, nb::arg("names"))
      .def("select_rows", &Dataset::select_rows, nb::arg("begin"), nb::arg("end"))
      .def("for_rank", &Dataset::for_rank, nb::arg("rank"), nb::arg("world_size"))
      .def("share_for_rank", &Dataset::share_for_rank, nb::arg("rank"), nb::arg("world_size"))
      .def(
          "to_host",
          [](const Dataset& dataset, bool verify, unsigned threads) {
            HostOptions options;
            options.verify = verify;
            options.threads = threads;
            return dataset.to_host(options);
          },
          nb::arg("verify") = true, nb::arg("threads") = 0,
          nb::call_guard<nb::gil_scoped_release>())
      .def(
          "to_device",
          [](const Dataset& dataset, int device, const std::string& placement,
             const std::string& read_mode, bool verify, unsigned threads,
             std::size_t staging_bytes) {
            DeviceOptions options;
            options.placement = placement_of(placement);
            options.read_mode = parse_read_mode(read_mode);
            options.verify = verify;
            options.threads = threads;
            if (staging_bytes) options.staging_bytes = staging_bytes;
            nb::gil_scoped_release release;
            return dataset.to_device(device, options);
          },
          nb::arg("device"), nb::arg("placement") = "device", nb::arg("read_mode") = "auto",
          nb::arg("verify") = true, nb::arg("threads") = 0, nb::arg("staging_bytes") = 0);
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

}  // namespace

NB_MODULE(_gpucache, m) {
  m.doc() = "gpucache runtime reader (native part; use the gpucache package)";
  bind_error(m);
  bind_tools(m);
  bind_runtime_info(m);
  bind_batch_order(m);
  bind_host_data(m);
  bind_device_data(m);
  bind_dataset(m);
  bind_batch(m);
  bind_stream(m);
}
