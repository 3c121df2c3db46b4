// Turns the pickle machine's objects into the shared gpucache::Value tree.
#pragma once

#include <string>

#include "pt/pickle_globals.hpp"
#include "pt/pickle_object.hpp"

namespace gpucache::detail::pickle {

// The text a dict key is stored under: str as is; int, float, bool and None as Python's repr;
// tuples of those as "(1, 'a')". Fails on other key types.
std::string key_text(const PyValue& key, Context& context);

// Converts the unpickled root. Objects shared through the memo are converted once and shared in
// the result too; the expanded size and the copied text are capped by the limits. Bytes become
// 1-D u8 tensors, integers beyond 64 bits their decimal text, torch dtypes "torch.float32", and
// a bare storage a 1-D tensor over all of it.
Value to_value(const PyValue& root, Context& context);

}  // namespace gpucache::detail::pickle
