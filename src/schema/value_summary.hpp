// Short, data-free descriptions of Value nodes, shared by probe output and schema errors:
// "tensor f32 [1000, 384]", "list[1000] of str", "dict{question: str, answer_embedding: ...}".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpucache/value.hpp"

namespace gpucache::detail {

// "tensor f32 [384]", plus " big-endian" / " strided" when the bytes are not usable as they are.
std::string tensor_text(const Tensor& tensor);
// A JSON-style quoted string, control characters escaped, cut to max_chars code points + "...".
std::string quote_text(std::string_view text, std::size_t max_chars);

// One line. Lists report their length in the first `sized_levels` levels only: deeper, inside
// rows, a length would make rows of different lengths look like different structures (0 is
// what probe uses to group rows). A list's element type comes from its first elements (at most
// 64 are compared); dicts show up to 12 keys. Never reads tensor data; `depth` bounds recursion
// (pickles can be cyclic).
std::string value_signature(const Value& value, int sized_levels = 2, int depth = 6);

}  // namespace gpucache::detail
