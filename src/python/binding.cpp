// gpucache._gpucache: the runtime reader for Python. Columns come back as DLPack-capable arrays
// (nanobind ndarrays) whose owner capsule holds the runtime's owner token, so a mapping or device
// allocation lives exactly as long as the last tensor made from it. The pure-Python package
// (src/python/gpucache) turns them into torch tensors or numpy arrays.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <memory>

#include "gpucache/runtime.hpp"

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
  using code = nb::dlpack::dtype_code;
  auto make = [](code c, int bits) {
    return nb::dlpack::dtype{static_cast<std::uint8_t>(c), static_cast<std::uint8_t>(bits), 1};
  };
  switch (dtype) {
    case DType::f32:
      return make(code::Float, 32);
    case DType::f16:
      return make(code::Float, 16);
    case DType::bf16:
      return wire.bf16_as_u16 ? make(code::UInt, 16) : make(code::Bfloat, 16);
    case DType::f64:
      return make(code::Float, 64);
    case DType::i64:
      return make(code::Int, 64);
    case DType::i32:
      return make(code::Int, 32);
    case DType::i16:
      return make(code::Int, 16);
    case DType::i8:
      return make(code::Int, 8);
    case DType::u16:
      return make(wire.unsigned_as_signed ? code::Int : code::UInt, 16);
    case DType::u32:
      return make(wire.unsigned_as_signed ? code::Int : code::UInt, 32);
    case DType::u64:
      return make(wire.unsigned_as_signed ? code::Int : code::UInt, 64);
    case DType::u8:
    case DType::boolean:
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
      return make(code::UInt, 8);
  }
  return make(code::UInt, 8);
}

// A [rows, padded_dim] (rank 2) or [rows] (rank 1) array over `data`, kept alive by `owner`.
nb::ndarray<> make_array(const void* data, std::uint64_t rows, const Column& column,
                         const std::shared_ptr<const void>& owner, int device_type, int device_id,
                         Wire wire) {
  auto* keep = new std::shared_ptr<const void>(owner);
  nb::capsule capsule(keep, [](void* pointer) noexcept {
    delete static_cast<std::shared_ptr<const void>*>(pointer);
  });
  const std::size_t shape[2] = {static_cast<std::size_t>(rows),
                                static_cast<std::size_t>(column.padded_dim)};
  return nb::ndarray<>(const_cast<void*>(data), column.rank() == 2 ? 2 : 1, shape, capsule, nullptr,
                       wire_dtype(column.dtype, wire), device_type, device_id);
}

nb::dict column_dict(const Column& column) {
  nb::dict out;
  out["name"] = column.name;
  out["kind"] = std::string(column_kind_name(column.kind));
  out["dtype"] = std::string(dtype_name(column.dtype));
  out["rank"] = column.rank();
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

Placement parse_placement(const std::string& text) {
  if (text == "device") return Placement::device;
  if (text == "host_pinned") return Placement::host_pinned;
  throw gpucache::Error("", "placement", "'" + text + "' is not one of device, host_pinned");
}

ReadMode parse_read_mode(const std::string& text) {
  if (text == "auto") return ReadMode::automatic;
  if (text == "mmap") return ReadMode::register_mmap;
  if (text == "pread") return ReadMode::pread;
  throw gpucache::Error("", "read_mode", "'" + text + "' is not one of auto, mmap, pread");
}

}  // namespace

NB_MODULE(_gpucache, m) {
  m.doc() = "gpucache runtime reader (native part; use the gpucache package)";
  nb::exception<gpucache::Error>(m, "Error", PyExc_RuntimeError);

  m.def("cuda_available", &cuda_available,
        "True when a CUDA runtime library loads and sees at least one GPU");
  m.def("cuda_library", &cuda_library, "The libcudart file the runtime loaded");

  nb::class_<HostData>(m, "HostData")
      .def_prop_ro("rows", &HostData::rows)
      .def("columns", [](const HostData& data) { return column_list(data.columns()); })
      .def(
          "pieces",
          [](const HostData& data, const std::string& name, bool numpy, bool unsigned_as_signed) {
            const Column& column = data.column(name);
            nb::list out;
            for (const HostPiece& piece : data.pieces(name)) {
              const auto array =
                  make_array(piece.data, piece.rows, column, data.owner(), nb::device::cpu::value,
                             0, Wire{numpy, unsigned_as_signed});
              // numpy gets its own arrays; others a DLPack capsule (torch.utils.dlpack).
              out.append(numpy ? nb::cast(nb::ndarray<nb::numpy>(array)) : nb::cast(array));
            }
            return out;
          },
          nb::arg("name"), nb::arg("numpy") = false, nb::arg("unsigned_as_signed") = false,
          "Zero-copy views of a tensor column, one per shard, in row order")
      .def(
          "joined",
          [](const HostData& data, const std::string& name, bool numpy,
             bool unsigned_as_signed) -> nb::object {
            const Column& column = data.column(name);
            const std::byte* joined = data.joined(name);
            if (joined == nullptr) return nb::none();
            const auto array =
                make_array(joined, data.rows(), column, data.owner(), nb::device::cpu::value, 0,
                           Wire{numpy, unsigned_as_signed});
            return numpy ? nb::cast(nb::ndarray<nb::numpy>(array)) : nb::cast(array);
          },
          nb::arg("name"), nb::arg("numpy") = false, nb::arg("unsigned_as_signed") = false,
          "A zero-copy view of all selected rows of a tensor column, or None when its shards' "
          "parts could not be mapped side by side")
      .def(
          "texts",
          [](const HostData& data, const std::string& name) {
            nb::list out;
            for (std::uint64_t row = 0; row < data.rows(); ++row) {
              const std::string_view text = data.text(name, row);
              PyObject* string = PyUnicode_DecodeUTF8(
                  text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
              if (!string) throw nb::python_error();
              out.append(nb::steal(string));
            }
            return out;
          },
          nb::arg("name"))
      .def("mapped_ranges", [](const HostData& data) {
        nb::list out;
        for (const MappedRange& range : data.mapped_ranges())
          out.append(
              nb::make_tuple(reinterpret_cast<std::uintptr_t>(range.data), range.size, range.path));
        return out;
      });

  nb::class_<DeviceData>(m, "DeviceData")
      .def_prop_ro("rows", &DeviceData::rows)
      .def_prop_ro("bytes", &DeviceData::bytes)
      .def_prop_ro("device", &DeviceData::device)
      .def_prop_ro("placement",
                   [](const DeviceData& data) {
                     return data.placement() == Placement::device ? "device" : "host_pinned";
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
            return make_array(column.data, data.rows(), column.column, data.owner(),
                              nb::device::cuda::value, data.device(),
                              Wire{false, unsigned_as_signed});
          },
          nb::arg("name"), nb::arg("unsigned_as_signed") = false)
      .def("stats", [](const DeviceData& data) {
        const LoadStats& stats = data.stats();
        nb::dict out;
        out["bytes_copied"] = stats.bytes_copied;
        out["bytes_verified"] = stats.bytes_verified;
        out["shards_registered"] = stats.shards_registered;
        out["shards_staged"] = stats.shards_staged;
        out["seconds"] = stats.seconds;
        return out;
      });

  nb::class_<Dataset>(m, "NativeDataset")
      .def_static("open", &Dataset::open, nb::arg("path"), nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("path", &Dataset::path)
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
      .def("select_columns", &Dataset::select_columns, nb::arg("names"))
      .def("select_rows", &Dataset::select_rows, nb::arg("begin"), nb::arg("end"))
      .def("for_rank", &Dataset::for_rank, nb::arg("rank"), nb::arg("world_size"))
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
            options.placement = parse_placement(placement);
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
