// Reading JSON lines into the shared value tree.
#pragma once

#include <string>

#include "gpucache/readers.hpp"
#include "gpucache/value.hpp"

namespace gpucache {

// A list with one dict per line; numeric arrays become 1-D f32 tensors viewing one arena for the
// whole file. See src/inputs/jsonl/FORMAT.md. Ignores `options` for now: lines are parsed in order
// into that single arena, and splitting the file would need a merge step it does not have yet.
Value read_jsonl(const std::string& path, const ReadOptions& options = {});

}  // namespace gpucache
