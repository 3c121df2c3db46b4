// Marks the functions and classes of gpucache's installed C++ API. Modules are compiled with
// hidden visibility (they end up inside libgpucache_runtime.so and the Python extension), so only
// what carries this mark is exported from a shared library that links them.
#pragma once

#define GPUCACHE_API __attribute__((visibility("default")))
