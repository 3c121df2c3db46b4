// Reading torch.save files natively: no Python, no libtorch, and no pickle is ever executed.
#pragma once

#include <string>

#include "gpucache/readers.hpp"
#include "gpucache/value.hpp"

namespace gpucache {

// The object a torch.save file holds, as a value tree whose tensors view the file's memory map
// without copying (storages that had to be inflated are owned by the tensors instead). Reads the
// zip format of torch 1.6 to 2.x and the legacy format of earlier versions (or of
// _use_new_zipfile_serialization=False). Tensor data is not read. Pickled objects are limited to
// an allowlist of torch and numpy types (src/inputs/pt/FORMAT.md); anything else, and any malformed
// input, throws gpucache::Error naming the file and where.
//
// With `options.threads` other than 1, a zip archive's directory is read on a second thread while
// data.pkl is unpickled (a dataset saved as one tensor per row has a record each).
//
// The first call turns off glibc's fastbins for the whole process (see pt.cpp): unpickling a list
// of dicts builds and frees millions of small objects.
Value read_pt(const std::string& path, const ReadOptions& options = {});

}  // namespace gpucache
