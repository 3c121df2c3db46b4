// gpucache._gpucache, the dataset half of the runtime reader: NativeDataset (open, select, split by
// rank) and its two kinds of data, HostData (zero-copy views of the mapped shards) and DeviceData
// (one allocation on a GPU or in pinned host memory).
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
#include <string>
#include <vector>

#include "binding_arrays.hpp"
#include "binding_steps.hpp"
#include "gpucache/error.hpp"
#include "gpucache/runtime.hpp"

namespace gpucache::python {

using namespace gpucache::runtime;

namespace {

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

}  // namespace

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

}  // namespace gpucache::python
