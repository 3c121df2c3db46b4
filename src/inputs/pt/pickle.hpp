// A restricted pickle machine for the objects torch.save writes (protocols 2 to 5). It never
// imports or calls anything: GLOBALs are matched as text against a fixed allowlist modelled on
// PyTorch's _weights_only_unpickler, and the few allowed callables are re-implemented here.
// Everything it reads is bounds-checked and every resource it uses is capped.
// See src/inputs/pt/FORMAT.md for the opcode subset, the allowlist and the limits.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpucache/dtype.hpp"
#include "gpucache/value.hpp"

namespace gpucache::detail {

struct PickleLimits {
  std::uint64_t max_depth = 256;                       // container nesting
  std::uint64_t max_stack = std::uint64_t{1} << 24;    // stack entries, and open MARKs
  std::uint64_t max_memo = std::uint64_t{1} << 24;     // memo entries
  std::uint64_t max_objects = std::uint64_t{1} << 27;  // objects created while unpickling
  // Shared subtrees are converted once, but a consumer walking the result sees them expanded:
  // a pickle of n bytes can describe 2^n nodes through the memo, so the expansion is capped.
  std::uint64_t max_values = std::uint64_t{1} << 27;
  // Bytes of text copied into the result (strings and dict keys); the memo lets a short pickle
  // repeat one long string many times.
  std::uint64_t max_text_bytes = std::uint64_t{1} << 32;
  std::uint64_t max_long_bytes = 1024;  // LONG4 integers
  // Bytes of lists, tuples and dicts (objects and items): they come from an arena that frees
  // nothing until the end, so objects a pickle makes and drops count too. The cap is this base
  // plus this many bytes per byte of pickle; real pickles stay far below it.
  std::uint64_t object_bytes_base = std::uint64_t{1} << 30;
  std::uint64_t object_bytes_per_pickle_byte = 32;
};

// A tensor storage named by a persistent id ('storage', torch.FloatStorage, key, location, numel).
// The pickle does not say where the bytes are; the container reader fills `storage` afterwards.
struct StorageRef {
  std::string key;
  DType dtype = DType::u8;  // the storage's element type (u8 for torch.storage.UntypedStorage)
  std::uint64_t numel = 0;  // in elements of dtype
  std::uint64_t nbytes = 0;
  std::shared_ptr<Storage> storage;  // empty bytes until filled
};

struct PickleOptions {
  std::string file;  // the input file, for errors
  std::string name;  // the pickle inside it ("data.pkl"), for errors
  // Added to positions in errors: 0 for a zip record, the pickle's file offset for legacy files.
  std::uint64_t base_offset = 0;
  PickleLimits limits;
};

struct PickleResult {
  Value value;
  std::vector<StorageRef> storages;  // one per distinct key, in order of first use
  // Tensors viewing those storages: check_bounds() them once the storages are filled, and mark
  // them big-endian when the container says the storages are.
  std::vector<std::shared_ptr<Tensor>> storage_tensors;
  std::uint64_t end = 0;  // bytes consumed, up to and including STOP
};

// Runs the pickle at the start of `bytes` up to its STOP opcode. Throws gpucache::Error
// "<file>: <cause> in <name> at byte <N>" on anything outside the supported subset, e.g.
// "refusing global 'posix.system' in data.pkl at byte 123".
PickleResult unpickle(std::span<const std::byte> bytes, const PickleOptions& options);

}  // namespace gpucache::detail
