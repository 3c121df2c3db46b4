// Reading numpy .npz archives (np.savez and np.savez_compressed) into the shared value tree.
#pragma once

#include <string>

#include "gpucache/readers.hpp"
#include "gpucache/value.hpp"

namespace gpucache {

// A dict from array name (the member name without ".npy") to tensor, in archive order. Stored
// members are zero-copy views into the file's memory map; deflated members are inflated into
// buffers the tensors own, on up to `options.threads` threads (one member per thread at a time).
// Members not ending in ".npy" are skipped. Object arrays are refused. Throws gpucache::Error
// naming the file and member on any malformed input: the error of the first bad member in archive
// order, whatever the thread count. See src/inputs/npz/FORMAT.md.
Value read_npz(const std::string& path, const ReadOptions& options = {});

}  // namespace gpucache
