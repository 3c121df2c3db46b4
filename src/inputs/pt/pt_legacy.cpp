// The legacy torch.save layout (torch < 1.6, or _use_new_zipfile_serialization=False):
//   pickle 1: the magic number 0x1950a86a20f9469cfc6c
//   pickle 2: the protocol version, 1001
//   pickle 3: sys info {'protocol_version': 1001, 'little_endian': ..., 'type_sizes': {...}}
//   pickle 4: the object, storages referenced by persistent id
//   pickle 5: the sorted list of storage keys
//   then, per key in that order: int64 element count (little-endian) and the raw elements.
#include <unordered_map>

#include "gpucache/common/byte_reader.hpp"
#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/error_text.hpp"
#include "gpucache/error.hpp"
#include "pt/pt_readers.hpp"

namespace gpucache::detail {
namespace {

constexpr std::string_view kMagicNumber = "119547037146038801333356";  // 0x1950a86a20f9469cfc6c
constexpr std::int64_t kProtocolVersion = 1001;

PickleResult next_pickle(const MappedFile& file, std::uint64_t& position, const char* name) {
  PickleOptions options;
  options.file = file.path();
  options.name = name;
  options.base_offset = position;
  PickleResult result = unpickle(file.bytes().subspan(position), options);
  position += result.end;
  return result;
}

void check_no_storages(const PickleResult& result, const MappedFile& file, const char* what) {
  if (!result.storages.empty())
    throw Error(file.path(), "", std::string(what) + " must not reference storages");
}

}  // namespace

Value read_pt_legacy(const std::shared_ptr<const MappedFile>& file) {
  const std::string& path = file->path();
  std::uint64_t position = 0;

  const PickleResult magic = next_pickle(*file, position, "legacy magic number pickle");
  const auto* magic_text = magic.value.as_string();
  if (!magic_text || *magic_text != kMagicNumber)
    throw Error(path, "byte 0", "not a torch.save file (wrong magic number)");

  const std::uint64_t protocol_at = position;
  const PickleResult protocol = next_pickle(*file, position, "legacy protocol pickle");
  if (!protocol.value.as_int() || *protocol.value.as_int() != kProtocolVersion)
    throw Error(path, "byte " + std::to_string(protocol_at),
                "unsupported legacy protocol version (expected 1001)");

  // Storage bytes are little-endian whatever sys_info says: torch converts on write and read.
  const std::uint64_t sys_info_at = position;
  const PickleResult sys_info = next_pickle(*file, position, "legacy sys info pickle");
  check_no_storages(sys_info, *file, "legacy sys info");
  if (!sys_info.value.as_dict())
    throw Error(path, "byte " + std::to_string(sys_info_at), "legacy sys info must be a dict");

  PickleResult object = next_pickle(*file, position, "legacy object pickle");

  const std::uint64_t keys_at = position;
  const PickleResult keys = next_pickle(*file, position, "legacy storage key pickle");
  check_no_storages(keys, *file, "legacy storage key list");
  const List* key_list = keys.value.as_list();
  if (!key_list || key_list->is_tuple)
    throw Error(path, "byte " + std::to_string(keys_at), "legacy storage keys must be a list");

  std::unordered_map<std::string, StorageRef*> by_key;
  for (auto& storage : object.storages) by_key.emplace(storage.key, &storage);
  std::unordered_map<std::string, bool> seen;
  ByteReader reader(file->bytes(), path);
  reader.seek(position, "legacy storage data");
  for (const auto& item : key_list->items) {
    const auto* key = item.as_string();
    if (!key)
      throw Error(path, "byte " + std::to_string(keys_at), "legacy storage key is not a str");
    if (!seen.emplace(*key, true).second)
      throw Error(path, "byte " + std::to_string(keys_at),
                  "storage key " + quoted(*key, kShownChars, '\'') + " is listed twice");
    auto found = by_key.find(*key);
    if (found == by_key.end())
      throw Error(
          path, "byte " + std::to_string(keys_at),
          "storage key " + quoted(*key, kShownChars, '\'') + " is not used by the object pickle");
    StorageRef& storage = *found->second;
    const std::uint64_t count_at = reader.file_offset();
    const auto count = reader.read_le<std::int64_t>("legacy storage element count");
    if (count < 0 || static_cast<std::uint64_t>(count) != storage.numel)
      throw Error(path, "byte " + std::to_string(count_at),
                  "storage " + quoted(*key, kShownChars, '\'') + " has " + std::to_string(count) +
                      " elements but the object pickle declares " + std::to_string(storage.numel));
    auto bytes = reader.take(storage.nbytes, "legacy storage data");
    *storage.storage = Storage{bytes, file, std::nullopt};
  }
  for (const auto& storage : object.storages)
    if (!seen.count(storage.key))
      throw Error(path, "",
                  "storage " + quoted(storage.key, kShownChars, '\'') + " is used but has no data");

  check_storage_tensors(object, path);
  return std::move(object.value);
}

}  // namespace gpucache::detail
