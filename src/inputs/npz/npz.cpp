#include "gpucache/npz.hpp"

#include "npy/npy_header.hpp"
#include "zip/zip.hpp"
#include "gpucache/common/mapped_file.hpp"

namespace gpucache {

Value read_npz(const std::string& path) {
  const detail::ZipArchive archive(detail::MappedFile::open(path));
  auto dict = std::make_shared<Dict>();
  for (const auto& member : archive.members()) {
    constexpr std::string_view suffix = ".npy";
    const std::string_view name = member.name;
    if (name.size() <= suffix.size() || !name.ends_with(suffix)) continue;
    const Storage bytes = archive.read(member);
    auto tensor = std::make_shared<Tensor>(
        detail::npy_tensor(bytes.bytes, bytes.owner, path, "member " + member.name));
    dict->items.emplace_back(std::string(name.substr(0, name.size() - suffix.size())),
                             Value(std::move(tensor)));
  }
  return Value(std::move(dict));
}

}  // namespace gpucache
