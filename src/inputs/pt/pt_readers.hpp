// The two torch.save layouts; read_pt picks one by the file's first bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gpucache/common/mapped_file.hpp"
#include "gpucache/readers.hpp"
#include "gpucache/value.hpp"
#include "pt/pickle.hpp"

namespace gpucache::detail {

// torch >= 1.6: a zip archive with <prefix>/data.pkl and <prefix>/data/<key> records.
Value read_pt_zip(const std::shared_ptr<const MappedFile>& file, const ReadOptions& options);
// torch < 1.6: five pickles followed by the raw storages.
Value read_pt_legacy(const std::shared_ptr<const MappedFile>& file);
// The most bytes a tensor whose elements repeat (a stride-0 or overlapping view, e.g. x.expand)
// may name beyond its storage's size: such a view is read element by element, so its work grows
// with its shape, not with the file (FORMAT.md, "Views").
inline constexpr std::uint64_t kMaxRepeatedViewBytes = std::uint64_t{4} << 30;
// Once every storage is filled: bounds-checks each tensor against its storage, and refuses
// repeating views beyond kMaxRepeatedViewBytes.
void check_storage_tensors(const PickleResult& result, const std::string& path);

}  // namespace gpucache::detail
