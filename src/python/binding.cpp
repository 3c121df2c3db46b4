// gpucache._gpucache: the library for Python. The module definition is a list of named steps
// (binding_steps.hpp), each in the file of its job: the runtime reader (binding_dataset.cpp,
// binding_stream.cpp; columns come back as DLPack-capable arrays, binding_arrays.hpp) and the
// commands (binding_tools.cpp). The pure-Python package (src/python/gpucache) turns the arrays
// into torch tensors or numpy arrays.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <exception>
#include <string>
#include <vector>

#include "binding_steps.hpp"
#include "gpucache/error.hpp"
#include "gpucache/runtime.hpp"
#include "gpucache/shard/shard_layout.hpp"

namespace gpucache::python {

namespace nb = nanobind;

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
void bind_runtime_info(nb::module_& m) {
  m.def("cuda_available", &gpucache::runtime::cuda_available,
        "True when a CUDA runtime library loads and sees at least one GPU");
  m.def(
      "placements",
      [] {
        std::vector<std::string> names;
        for (const auto placement : gpucache::runtime::placements())
          names.emplace_back(gpucache::runtime::placement_name(placement));
        return names;
      },
      "The placement names to_device takes (the runtime's: device, host_pinned)");
  m.def("placement_margin", &gpucache::runtime::placement_margin, nb::arg("total_bytes"),
        "VRAM placement='auto' leaves free: 10% of the card, at least 1 GiB");
  m.def(
      "choose_placement",
      [](std::uint64_t needed, std::uint64_t free, std::uint64_t total, const std::string& where) {
        const auto choice = gpucache::runtime::choose_placement(needed, free, total, where);
        return std::make_pair(std::string(gpucache::runtime::placement_name(choice.placement)),
                              choice.reason);
      },
      nb::arg("needed_bytes"), nb::arg("free_bytes"), nb::arg("total_bytes"), nb::arg("where"),
      "placement='auto': (placement name, why) for a selection of needed_bytes on a GPU with "
      "free_bytes of total_bytes free (the runtime's rule, runtime.hpp choose_placement)");
  m.def("cuda_library", &gpucache::runtime::cuda_library, "The libcudart file the runtime loaded");
  m.def(
      "is_provenance_column",
      [](const std::string& name) { return gpucache::shard::is_provenance_column(name); },
      "True for the packer's provenance columns (@source, @source_row), which load and stream "
      "leave out unless named");
}

}  // namespace gpucache::python

NB_MODULE(_gpucache, m) {
  using namespace gpucache::python;
  m.doc() = "gpucache runtime reader (native part; use the gpucache package)";
  bind_error(m);
  bind_pack(m);
  bind_tool_commands(m);
  bind_library_tables(m);
  bind_runtime_info(m);
  bind_batch_order(m);
  bind_host_data(m);
  bind_device_data(m);
  bind_dataset(m);
  bind_batch(m);
  bind_stream(m);
}
