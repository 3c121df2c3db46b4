// One function per input format. Each maps the file, validates it, and returns the object tree
// (value.hpp) with tensors pointing into the mapped file wherever the bytes can be used as they
// are. Every reader throws gpucache::Error naming the file, where in it, and what is wrong.
//
// The readers live in src/inputs/<name>/ and are written independently; input.hpp picks one by
// extension or magic bytes.
#pragma once

#include <string>

#include "gpucache/value.hpp"

namespace gpucache {

struct ReadOptions {
  // Threads a reader may run beside the caller's: 0 for one per core, 1 for the caller's only.
  unsigned threads = 0;
};

// torch.save files (.pt, .pth, .bin): zip and legacy formats, through a safe unpickler.
Value read_pt(const std::string& path);
// NumPy .npz archives: a dict of array name -> tensor.
Value read_npz(const std::string& path);
// A single NumPy .npy array: a tensor.
Value read_npy(const std::string& path);
// .safetensors: a dict of tensor name -> tensor, plus "__metadata__" (a dict of str) when the
// header has one. See src/inputs/safetensors/FORMAT.md.
Value read_safetensors(const std::string& path);
// JSON lines: a list with one dict per line; numeric arrays become 1-D f32 tensors. See
// src/inputs/jsonl/FORMAT.md.
Value read_jsonl(const std::string& path);

}  // namespace gpucache
