// Reading HDF5 files (h5py, ann-benchmarks) through libhdf5. Built only when libhdf5 was found
// (src/inputs/CMakeLists.txt); the registry refuses .h5 files with one line otherwise.
#pragma once

#include <string>

#include "gpucache/readers.hpp"

namespace gpucache {

// One column per numeric, variable-length numeric or string dataset, anywhere in the file, named
// by its path ("/train"); rows are the first dimension and are read on demand, a range at a time,
// so chunked and compressed datasets never need to fit in memory. An ann-benchmarks file (train,
// test, neighbors, distances) maps to embedding=/train unless --field says otherwise. See
// src/inputs/hdf5/FORMAT.md. Ignores `options`: opening reads only the file's metadata.
InputData read_hdf5(const std::string& path, const ReadOptions& options = {});

}  // namespace gpucache
