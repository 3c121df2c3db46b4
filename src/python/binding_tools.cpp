// gpucache._gpucache, the tools half: pack, merge, verify, inspect, probe, export and push, calling
// the same library functions as the CLI with the same options, and returning what the CLI's --json
// prints
// (the Python layer, gpucache/_tools.py, parses it into dicts). The GIL is released while the
// library works; a progress callback takes it back for each report.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "binding_steps.hpp"
#include "gpucache/checks.hpp"
#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/error.hpp"
#include "gpucache/export.hpp"
#include "gpucache/input.hpp"
#include "gpucache/inspect.hpp"
#include "gpucache/merge.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/pack_options.hpp"
#include "gpucache/probe.hpp"
#include "gpucache/remote/remote.hpp"
#include "gpucache/verify.hpp"

namespace nb = nanobind;

namespace gpucache::python {

namespace {

using gpucache::DType;
using gpucache::UsageError;

// Thrown through the library when the Python callback raised (or Ctrl-C arrived): the library
// unwinds as for any error, and the Python exception is raised in its place.
struct CallbackRaised : std::exception {
  const char* what() const noexcept override { return "the progress callback raised"; }
};

// Wraps a Python progress callable (or none) for the library. Each report also checks for
// signals, so Ctrl-C stops a long pack or verify.
class PythonProgress {
 public:
  explicit PythonProgress(nb::object callback) : callback_(std::move(callback)) {}

  gpucache::ProgressCallback function() {
    return [this](std::uint64_t done, std::uint64_t total) {
      nb::gil_scoped_acquire acquire;
      std::lock_guard lock(mutex_);
      if (error_) throw CallbackRaised();
      try {
        if (PyErr_CheckSignals() != 0) throw nb::python_error();
        if (callback_.is_valid() && !callback_.is_none()) callback_(done, total);
      } catch (nb::python_error& error) {
        error_.emplace(std::move(error));
        throw CallbackRaised();
      }
    };
  }

  // Runs the library call without the GIL; raises what the callback raised.
  template <typename Call>
  auto run(Call&& call) {
    try {
      nb::gil_scoped_release release;
      return call();
    } catch (const CallbackRaised&) {
      std::lock_guard lock(mutex_);
      if (error_) {
        error_->restore();
        error_.reset();
      }
      throw nb::python_error();
    }
  }

 private:
  nb::object callback_;
  std::mutex mutex_;
  std::optional<nb::python_error> error_;
};

DType dtype_of(const nb::dlpack::dtype& dtype, const std::string& column) {
  const int bits = dtype.bits;
  if (dtype.lanes == 1)
    if (const auto found = gpucache::dtype_from_dlpack(dtype.code, dtype.bits)) return *found;
  throw gpucache::Error("memory:" + column, "dtype",
                        "DLPack type code " + std::to_string(dtype.code) + " with " +
                            std::to_string(bits) + " bits is not a type gpucache stores");
}

using HostArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

std::span<const std::byte> bytes_of(const HostArray& array) {
  return {static_cast<const std::byte*>(array.data()), array.nbytes()};
}

// One column from Python: (name, kind, values, offsets or None[, device view[, time[, null
// rows]]]). Arrays are
// C-contiguous on the CPU (the Python layer makes them so) and are read where they lie. A CUDA
// tensor's column adds (data pointer, device index, tensor): the same values on its GPU, which the
// CUDA validation backend reads instead of uploading `values` (the tensor stays alive in the list
// the caller holds for the whole call).
// Any column's null rows (an Arrow column with nulls, _memory.py's seventh item): the rows pack
// drops with the reason null, as it drops a Parquet file's null rows.
void read_null_rows(const nb::tuple& entry, gpucache::MemoryColumn& column) {
  if (entry.size() > 6 && !entry[6].is_none())
    column.null_rows = nb::cast<std::vector<std::uint64_t>>(entry[6]);
}

gpucache::MemoryColumn memory_column(const nb::handle& item, std::vector<HostArray>& keep) {
  const auto entry = nb::cast<nb::tuple>(item);
  gpucache::MemoryColumn column;
  column.name = nb::cast<std::string>(entry[0]);
  const auto kind = gpucache::parse_column_kind(nb::cast<std::string>(entry[1]));
  if (!kind) throw UsageError("column '" + column.name + "': unknown kind");
  column.kind = *kind;
  HostArray values;
  try {
    values = nb::cast<HostArray>(entry[2], false);
  } catch (const nb::cast_error&) {
    throw gpucache::Error("memory:" + column.name, "data",
                          "is not a C-contiguous CPU array readable through the buffer protocol "
                          "or DLPack");
  }
  keep.push_back(values);
  column.dtype = dtype_of(values.dtype(), column.name);
  column.values = bytes_of(values);
  if (column.kind == gpucache::ColumnKind::tensor) {
    if (values.ndim() == 0)
      throw gpucache::Error("memory:" + column.name, "shape",
                            "is a scalar; a column needs one entry per row");
    column.rows = values.shape(0);
    for (std::size_t d = 1; d < values.ndim(); ++d) column.row_shape.push_back(values.shape(d));
    if (entry.size() > 4 && !entry[4].is_none()) {
      const auto view = nb::cast<nb::tuple>(entry[4]);
      column.device_values = reinterpret_cast<const void*>(nb::cast<std::uintptr_t>(view[0]));
      column.device_ordinal = nb::cast<int>(view[1]);
    }
    // Dates and times: (kind, unit, tz or None, null rows) from _memory.py's time columns.
    if (entry.size() > 5 && !entry[5].is_none()) {
      const auto time = nb::cast<nb::tuple>(entry[5]);
      const auto kind = gpucache::parse_time_kind(nb::cast<std::string>(time[0]));
      const auto unit = gpucache::parse_time_unit(nb::cast<std::string>(time[1]));
      if (!kind || !unit)
        throw gpucache::Error("memory:" + column.name, "time", "unknown kind or unit");
      column.time = gpucache::ColumnTime{
          *kind, *unit, time[2].is_none() ? std::string() : nb::cast<std::string>(time[2])};
      column.null_rows = nb::cast<std::vector<std::uint64_t>>(time[3]);
    }
    read_null_rows(entry, column);
    return column;
  }
  if (column.kind == gpucache::ColumnKind::text && column.dtype != DType::u8 &&
      column.dtype != DType::i8)
    throw gpucache::Error("memory:" + column.name, "values", "text values must be uint8 bytes");
  HostArray offsets;
  try {
    offsets = nb::cast<HostArray>(entry[3], false);
  } catch (const nb::cast_error&) {
    throw gpucache::Error("memory:" + column.name, "offsets",
                          "is not a C-contiguous CPU int64 array");
  }
  keep.push_back(offsets);
  if (dtype_of(offsets.dtype(), column.name) != DType::i64 || offsets.ndim() != 1)
    throw gpucache::Error("memory:" + column.name, "offsets", "must be a 1-D int64 array");
  column.offsets = {static_cast<const std::int64_t*>(offsets.data()), offsets.shape(0)};
  column.rows = column.offsets.empty() ? 0 : column.offsets.size() - 1;
  if (column.kind == gpucache::ColumnKind::text) column.dtype = DType::u8;
  read_null_rows(entry, column);
  return column;
}

// A Python object as the value tree the .pt reader gives for the same objects saved in a file:
// dict (keys as text, as the .pt reader stores non-string keys), list and tuple, str, int, float,
// bool, None; anything else goes through `prepare` (the Python layer's C-contiguous host view of a
// tensor or array: gpucache/_memory.py host_leaf) and becomes a tensor whose bytes are copied, so
// the tree owns them while pack runs without the GIL (a list of dicts holds small per-row tensors;
// an LLM cache one vector per key). Without `data`, `prepare` only describes a leaf as (dtype
// name, shape) (_memory.py leaf_description) and the tensor carries those alone
// (Storage::not_read), for deciding how to read a dict without copying it. `where` is the path
// so far, for errors.
gpucache::Value value_tree(nb::handle object, const nb::object& prepare, bool data,
                           const std::string& where, int depth) {
  if (depth > 64)
    throw gpucache::Error(where, "", "nests deeper than 64 levels; gpucache reads at most 64");
  if (object.is_none()) return gpucache::None{};
  if (PyBool_Check(object.ptr())) return nb::cast<bool>(object);
  if (PyLong_Check(object.ptr())) {
    try {
      return nb::cast<std::int64_t>(object);
    } catch (const nb::cast_error&) {
      throw gpucache::Error(where, "",
                            "holds an integer outside int64; store it as a string or a float");
    }
  }
  if (PyFloat_Check(object.ptr())) return nb::cast<double>(object);
  if (PyUnicode_Check(object.ptr())) return nb::cast<std::string>(object);
  if (PyDict_Check(object.ptr())) {
    auto dict = std::make_shared<gpucache::Dict>();
    for (const auto& [key, value] : nb::borrow<nb::dict>(object)) {
      const std::string name = nb::cast<std::string>(nb::str(key));
      dict->items.emplace_back(name,
                               value_tree(value, prepare, data, where + "." + name, depth + 1));
    }
    return dict;
  }
  if (PyList_Check(object.ptr()) || PyTuple_Check(object.ptr())) {
    auto list = std::make_shared<gpucache::List>();
    list->is_tuple = PyTuple_Check(object.ptr());
    // Deciding how to read a dict (memory_dict_is_llm_cache) needs every value a tensor: a list
    // value settles it without its items, which may be a million strings of a text column.
    if (!data && depth > 0) return list;
    std::size_t index = 0;
    for (const auto& item : object) {
      list->items.push_back(
          value_tree(item, prepare, data, where + "[" + std::to_string(index) + "]", depth + 1));
      ++index;
    }
    return list;
  }
  if (!data) {
    // Deciding only: `prepare` hands over (dtype name, shape) without touching the data (a CUDA
    // tensor is not copied to the host just to be looked at); dtype names as torch and numpy
    // spell them ("float32", "bfloat16"), read through the dtype table.
    try {
      const auto meta = nb::cast<nb::tuple>(prepare(object));
      const auto dtype = gpucache::dtype_from_torch(nb::cast<std::string>(meta[0]));
      if (!dtype) return gpucache::None{};
      auto tensor = std::make_shared<gpucache::Tensor>();
      tensor->dtype = *dtype;
      for (const auto& extent : nb::cast<nb::tuple>(meta[1]))
        tensor->shape.push_back(nb::cast<std::int64_t>(extent));
      tensor->strides.assign(tensor->shape.size(), 1);
      for (std::size_t d = tensor->shape.size(); d-- > 1;)
        tensor->strides[d - 1] = tensor->strides[d] * tensor->shape[d];
      tensor->storage =
          std::make_shared<const gpucache::Storage>(gpucache::Storage::not_read(tensor->nbytes()));
      return tensor;
    } catch (const nb::cast_error&) {
      return gpucache::None{};  // no tensor: the dict is columns, which say what is wrong
    } catch (nb::python_error&) {
      return gpucache::None{};
    }
  }
  HostArray array;
  auto refuse = [&](const std::string& why) {
    return gpucache::Error(where, "",
                           "holds a " + nb::cast<std::string>(nb::type_name(object.type())) + why +
                               "; convert it to a tensor, an array, a dict, a list, str, int, "
                               "float, bool or None");
  };
  try {
    array = nb::cast<HostArray>(prepare(object), false);
  } catch (const nb::cast_error&) {
    throw refuse(", which is no C-contiguous CPU array");
  } catch (nb::python_error& error) {
    throw refuse(" (" + nb::cast<std::string>(nb::str(error.value())) + ")");
  }
  const DType dtype = dtype_of(array.dtype(), where);
  std::vector<std::int64_t> shape;
  for (std::size_t d = 0; d < array.ndim(); ++d)
    shape.push_back(static_cast<std::int64_t>(array.shape(d)));
  const auto bytes = bytes_of(array);
  return std::make_shared<gpucache::Tensor>(gpucache::Tensor::from_buffer(
      dtype, std::move(shape), std::vector<std::byte>(bytes.begin(), bytes.end())));
}

// pack()'s keyword arguments, which the Python layer has turned into the CLI's text forms (a list
// of texts per keyword), applied through the pack option table's parsers.
void apply_pack_option(gpucache::PackOptions& options, const std::string& key,
                       const nb::handle& value) {
  const gpucache::PackOptionInfo* info = gpucache::find_pack_option_keyword(key);
  if (info == nullptr) throw UsageError("pack() got an unknown option '" + key + "'");
  const auto texts = nb::cast<std::vector<std::string>>(value);
  if (texts.size() > 1 && info->type != gpucache::PackOptionType::texts)
    throw UsageError("pack() option '" + key + "' takes one value");
  for (const auto& text : texts) info->apply(options, text, info->python);
}

std::string pack_json(const std::vector<std::string>& inputs, const std::string& output,
                      const nb::list& memory, const nb::dict& keywords, bool show_progress,
                      nb::object callback, nb::object tree, nb::object prepare) {
  gpucache::PackOptions options;
  options.inputs = inputs;
  options.output_dir = output;
  std::vector<HostArray> keep;  // the arrays' owners, for as long as pack reads them
  for (const auto& item : memory) options.memory_columns.push_back(memory_column(item, keep));
  if (!tree.is_none())
    options.memory_tree =
        std::make_shared<const gpucache::Value>(value_tree(tree, prepare, true, "memory", 0));
  for (const auto& [key, value] : keywords)
    if (!value.is_none()) apply_pack_option(options, nb::cast<std::string>(key), value);
  options.show_progress = show_progress;
  PythonProgress progress(std::move(callback));
  options.progress_callback = progress.function();
  return progress.run([&] { return gpucache::pack(options).to_json(); });
}

std::string verify_json(const std::string& path, bool deep, unsigned threads,
                        const std::string& device, bool show_progress, nb::object callback,
                        const std::string& cache_dir) {
  gpucache::VerifyOptions options;
  options.cache_dir = cache_dir;
  options.deep = deep;
  options.threads = threads;
  options.device = gpucache::parse_device_option(device);
  options.show_progress = show_progress;
  PythonProgress progress(std::move(callback));
  options.progress_callback = progress.function();
  return progress.run([&] { return gpucache::verify(path, options).to_json(); });
}

std::string probe_json(const std::string& file, const std::optional<std::string>& kind,
                       const std::vector<std::string>& fields,
                       const std::vector<std::string>& roles) {
  gpucache::ProbeOptions options;
  if (kind) {
    options.kind = gpucache::parse_source_kind(*kind);
    if (!options.kind) throw UsageError("kind must be dialogue, embeddings, llm-cache or tensors");
  }
  for (const auto& text : fields) options.fields.push_back(gpucache::parse_field_spec(text));
  for (const auto& text : roles) options.roles.push_back(gpucache::parse_role_spec(text));
  nb::gil_scoped_release release;
  // As `gpucache probe` does: what describes the data, never the data (a Parquet file's footer).
  return gpucache::probe_json(
      gpucache::read_input(file, gpucache::ReadOptions{.tensor_data = false}), file, options);
}

std::string export_json(const std::string& path, const std::string& to, const std::string& output,
                        const std::vector<std::string>& columns, unsigned threads) {
  gpucache::ExportOptions options;
  const auto format = gpucache::parse_export_format(to);
  if (!format) throw UsageError("to must be npy or safetensors, not '" + to + "'");
  options.format = *format;
  options.output = output;
  options.columns = columns;
  options.threads = threads;
  nb::gil_scoped_release release;
  return gpucache::export_dataset(path, options).to_json();
}

std::string merge_json(const std::vector<std::string>& parts, const std::string& output, bool copy,
                       bool fsync) {
  gpucache::MergeOptions options;
  options.parts = parts;
  options.output_dir = output;
  options.copy = copy;
  options.fsync = fsync;
  nb::gil_scoped_release release;
  return gpucache::merge(options).to_json();
}

}  // namespace

// pack (files, columns or an object tree in memory), the pack option table's keywords, merge.
void bind_pack(nb::module_& m) {
  m.def("pack_json", &pack_json, nb::arg("inputs"), nb::arg("output"), nb::arg("memory"),
        nb::arg("options"), nb::arg("show_progress") = false, nb::arg("callback") = nb::none(),
        nb::arg("tree") = nb::none(), nb::arg("prepare") = nb::none(),
        "gpucache pack: the result as `gpucache pack --json` prints it; `tree`, an object tree "
        "in memory (a list of dicts, an LLM cache dict) packed as a .pt of it would be, its "
        "tensors and arrays made host arrays by `prepare`");
  m.def(
      "memory_dict_is_llm_cache",
      [](nb::handle dict, nb::object describe) {
        return gpucache::memory_dict_is_llm_cache(value_tree(dict, describe, false, "memory", 0));
      },
      nb::arg("dict"), nb::arg("describe"),
      "Whether gpucache.pack reads this dict as an LLM cache (text -> vector, one row per key), "
      "as the .pt reader reads the same dict in a file (gpucache/schema.hpp "
      "memory_dict_is_llm_cache), rather than as a dict of columns");
  m.def(
      "pack_options",
      [] {
        std::vector<nb::tuple> entries;
        for (const auto& info : gpucache::pack_option_table())
          entries.push_back(nb::make_tuple(
              std::string(info.python), std::string(gpucache::pack_option_type_name(info.type)),
              std::string(info.default_text), std::string(info.flag), std::string(info.help)));
        return entries;
      },
      "pack()'s keyword options from the pack option table: (keyword, type, default text, CLI "
      "flag, help) each");
  m.def("merge_json", &merge_json, nb::arg("parts"), nb::arg("output"), nb::arg("copy") = false,
        nb::arg("fsync") = true, "gpucache merge: the result as `gpucache merge --json` prints it");
}

// verify, push, inspect, probe and export: each returns what the CLI's --json prints.
void bind_tool_commands(nb::module_& m) {
  m.def("verify_json", &verify_json, nb::arg("path"), nb::arg("deep") = false,
        nb::arg("threads") = 0, nb::arg("device") = "auto", nb::arg("show_progress") = false,
        nb::arg("callback") = nb::none(), nb::arg("cache_dir") = "",
        "gpucache verify: the report as `gpucache verify --json` prints it");
  m.def(
      "push_json",
      [](const std::string& dataset, const std::string& url) {
        nb::gil_scoped_release release;
        const auto result = gpucache::remote::push(dataset, url);
        return nlohmann::ordered_json{{"url", result.url},
                                      {"files", result.files},
                                      {"bytes", result.bytes},
                                      {"requests", result.requests}}
            .dump();
      },
      nb::arg("dataset"), nb::arg("url"),
      "gpucache push: the result as `gpucache push --json` prints it");
  m.def(
      "inspect_json",
      [](const std::string& path) {
        nb::gil_scoped_release release;
        return gpucache::inspect(path).json;
      },
      nb::arg("path"), "gpucache inspect: the report as `gpucache inspect --json` prints it");
  m.def("probe_json", &probe_json, nb::arg("file"), nb::arg("kind") = nb::none(),
        nb::arg("fields") = std::vector<std::string>{},
        nb::arg("roles") = std::vector<std::string>{},
        "gpucache probe: one file's object as `gpucache probe --json` prints it");
  m.def("export_json", &export_json, nb::arg("path"), nb::arg("to"), nb::arg("output"),
        nb::arg("columns") = std::vector<std::string>{}, nb::arg("threads") = 0,
        "gpucache export: the result as `gpucache export --json` prints it");
}

// The library's tables that Python reads instead of keeping copies: input formats and their
// suffixes, dtypes.
void bind_library_tables(nb::module_& m) {
  m.def(
      "built_input_formats",
      [] {
        std::vector<std::string> names;
        for (const auto& format : gpucache::input_formats())
          if (format.built()) names.emplace_back(format.name);
        return names;
      },
      "The input formats this build reads natively (\"npy\", \"parquet\", ...)");
  m.def(
      "input_format_suffixes",
      [] {
        // From the input registry, so Python recognises the files the library does.
        std::map<std::string, std::vector<std::string>> suffixes;
        for (const auto& format : gpucache::input_formats()) {
          auto& list = suffixes[std::string(format.name)];
          std::string_view rest = format.extensions;
          while (!rest.empty()) {
            const auto space = rest.find(' ');
            const auto word = rest.substr(0, space);
            if (!word.empty()) list.push_back("." + std::string(word));
            rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
          }
        }
        return suffixes;
      },
      "Every input format's file suffixes from the library's registry: {\"parquet\": "
      "[\".parquet\", \".pq\"], ...}, built or not");
  m.def(
      "dtype_table",
      [] {
        std::vector<nb::tuple> rows;
        for (const auto& info : gpucache::dtype_table())
          rows.push_back(nb::make_tuple(std::string(info.name), std::string(info.torch),
                                        info.numpy_kind ? std::string(1, info.numpy_kind) : "",
                                        info.size));
        return rows;
      },
      "The dtype table (gpucache/common/dtype_formats.hpp): (name, torch dtype, numpy kind letter "
      "or '' where numpy has none, bytes) per dtype");
}

}  // namespace gpucache::python
