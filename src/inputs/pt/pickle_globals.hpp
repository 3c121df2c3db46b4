// The allowlist of GLOBALs and the native re-implementations of the few callables on it
// (torch tensor rebuilders, OrderedDict, torch.Size, numpy array reconstruction, _codecs.encode).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pt/pickle.hpp"
#include "pt/pickle_object.hpp"

namespace gpucache::detail::pickle {

// What the callables need from the running machine: where errors point, and the storages.
struct Context {
  const PickleOptions& options;
  PickleResult& result;
  Arena* arena;             // where lists, tuples, dicts and numpy objects are made
  std::vector<Text> texts;  // what Bytes and BigInt values refer to
  std::vector<std::shared_ptr<Tensor>> tensors;  // what TensorHandle values refer to
  // Storage key -> result.storages index. torch.save numbers storages "0", "1", ... in order, so
  // decimal keys are looked up in a vector (slot n + 1 holds key n's index + 1) and only other
  // keys are hashed: a dataset of one storage per row then costs no hash node per row.
  std::unordered_map<std::string_view, std::size_t> storage_index;
  std::vector<std::uint32_t> numbered_storages;
  std::uint64_t opcode_offset = 0;

  TensorHandle keep(std::shared_ptr<Tensor> tensor) {
    tensors.push_back(std::move(tensor));
    return {tensors.size() - 1};
  }
  // "<cause> in <pickle> at byte <opcode offset>"
  [[noreturn]] void fail(const std::string& cause) const;
};

// nullptr when module.name is not allowed.
const AllowedGlobal* find_allowed_global(std::string_view module, std::string_view name) noexcept;
std::string global_name(const AllowedGlobal& global);

// REDUCE and NEWOBJ: `callable(*args)` for an allowed callable.
PyValue call_global(const AllowedGlobal& callable, std::span<const PyValue> args, Context& context);
// BUILD: applies `state` to `target` (OrderedDict attributes, numpy dtype and array state).
void build(PyValue& target, const PyValue& state, Context& context);
// BINPERSID: ('storage', StorageType, key, location, numel[, None]) -> StorageHandle.
PyValue persistent_load(const PyValue& pid, Context& context);

}  // namespace gpucache::detail::pickle
