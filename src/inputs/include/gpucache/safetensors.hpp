// Reading .safetensors files (huggingface/safetensors) into the shared value tree.
#pragma once

#include <string>

#include "gpucache/readers.hpp"
#include "gpucache/value.hpp"

namespace gpucache {

// A dict of tensor name -> tensor, plus "__metadata__" (a dict of str) when the header has one.
// Tensors view the memory map. See src/inputs/safetensors/FORMAT.md. Ignores `options`: the only
// work is parsing the JSON header, which is one sequential pass.
Value read_safetensors(const std::string& path, const ReadOptions& options = {});

}  // namespace gpucache
