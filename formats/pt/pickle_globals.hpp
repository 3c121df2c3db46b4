// The allowlist of GLOBALs and the native re-implementations of the few callables on it
// (torch tensor rebuilders, OrderedDict, torch.Size, numpy array reconstruction, _codecs.encode).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "formats/pt/pickle.hpp"
#include "formats/pt/pickle_object.hpp"

namespace gpucache::detail::pickle {

// What the callables need from the running machine: where errors point, and the storages.
struct Context {
  const PickleOptions& options;
  PickleResult& result;
  std::unordered_map<std::string, std::size_t> storage_index;  // key -> result.storages index
  std::uint64_t opcode_offset = 0;

  // "<cause> in <pickle> at byte <opcode offset>"
  [[noreturn]] void fail(const std::string& cause) const;
};

// nullptr when module.name is not allowed.
const AllowedGlobal* find_allowed_global(std::string_view module, std::string_view name) noexcept;
std::string global_name(const AllowedGlobal& global);

// REDUCE and NEWOBJ: `callable(*args)` for an allowed callable.
PyValue call_global(const AllowedGlobal& callable, const std::vector<PyValue>& args,
                    Context& context);
// BUILD: applies `state` to `target` (OrderedDict attributes, numpy dtype and array state).
void build(PyValue& target, const PyValue& state, Context& context);
// BINPERSID: ('storage', StorageType, key, location, numel[, None]) -> StorageHandle.
PyValue persistent_load(const PyValue& pid, Context& context);

}  // namespace gpucache::detail::pickle
