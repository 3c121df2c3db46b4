// The steps of gpucache._gpucache's module definition (NB_MODULE in binding.cpp), one function per
// group of names it registers, each defined in the file of its job.
#pragma once

#include <nanobind/nanobind.h>

namespace gpucache::python {

// binding.cpp: gpucache.Error and its translator; what the runtime found (CUDA, placements).
void bind_error(nanobind::module_& m);
void bind_runtime_info(nanobind::module_& m);

// binding_dataset.cpp: NativeDataset, its host views (HostData) and loads (DeviceData).
void bind_host_data(nanobind::module_& m);
void bind_device_data(nanobind::module_& m);
void bind_dataset(nanobind::module_& m);

// binding_stream.cpp: the batch order (NativeOrder), NativeBatch and NativeStream.
void bind_batch_order(nanobind::module_& m);
void bind_batch(nanobind::module_& m);
void bind_stream(nanobind::module_& m);

// binding_tools.cpp: pack and merge, the other commands (verify, inspect, probe, export, push),
// and the library's tables Python reads (dtypes, input formats, pack options).
void bind_pack(nanobind::module_& m);
void bind_tool_commands(nanobind::module_& m);
void bind_library_tables(nanobind::module_& m);

}  // namespace gpucache::python
