#include "gpucache/npz.hpp"

#include <atomic>
#include <exception>
#include <vector>

#include "gpucache/common/mapped_file.hpp"
#include "gpucache/common/parallel.hpp"
#include "npy/npy_header.hpp"
#include "zip/zip.hpp"

namespace gpucache {

// np.savez_compressed deflates every array, and inflating is the whole cost of reading one; each
// member is an independent deflate stream, so members are inflated on several threads. The result
// and the error (that of the first bad member in archive order) do not depend on the thread count.
Value read_npz(const std::string& path, const ReadOptions& options) {
  const detail::ZipArchive archive(detail::MappedFile::open(path));
  constexpr std::string_view suffix = ".npy";
  std::vector<const detail::ZipMember*> arrays;
  for (const auto& member : archive.members()) {
    const std::string_view name = member.name;
    if (name.size() > suffix.size() && name.ends_with(suffix)) arrays.push_back(&member);
  }

  std::vector<std::shared_ptr<Tensor>> tensors(arrays.size());
  std::vector<std::exception_ptr> errors(arrays.size());
  // Members after a failed one need not be read: only the first failure is reported.
  std::atomic<std::size_t> first_failure{arrays.size()};
  detail::parallel_for_each(arrays.size(), options.threads, [&](std::uint64_t i) {
    if (i > first_failure.load(std::memory_order_relaxed)) return;
    try {
      const Storage bytes = archive.read(*arrays[i]);
      tensors[i] = std::make_shared<Tensor>(
          detail::npy_tensor(bytes.bytes, bytes.owner, path, "member " + arrays[i]->name));
    } catch (...) {
      errors[i] = std::current_exception();
      std::size_t seen = first_failure.load();
      while (i < seen && !first_failure.compare_exchange_weak(seen, i)) {
      }
    }
  });
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);

  auto dict = std::make_shared<Dict>();
  dict->items.reserve(arrays.size());
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const std::string_view name = arrays[i]->name;
    dict->items.emplace_back(std::string(name.substr(0, name.size() - suffix.size())),
                             Value(std::move(tensors[i])));
  }
  return Value(std::move(dict));
}

}  // namespace gpucache
