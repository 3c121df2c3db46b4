// The tools half of gpucache._gpucache (binding_tools.cpp): pack, verify, inspect, probe, export.
#pragma once

#include <nanobind/nanobind.h>

void bind_tools(nanobind::module_& m);
