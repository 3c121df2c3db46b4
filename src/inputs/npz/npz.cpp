#include "gpucache/npz.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <string_view>
#include <vector>

#include "gpucache/common/error_text.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/common/parallel.hpp"
#include "gpucache/error.hpp"
#include "npy/npy_header.hpp"
#include "zip/zip.hpp"

namespace gpucache {
namespace {

// A member's array. For metadata only, a deflated numeric member is inflated no further than
// its .npy header (a 3 GiB array of zeros deflates to 3 MiB: probing it must not inflate it).
Value member_value(const detail::ZipArchive& archive, const detail::ZipMember& member,
                   const ReadOptions& options) {
  const std::string& path = archive.path();
  const std::string where = "member " + detail::escaped(member.name);
  if (!options.tensor_data && member.method == 8) {
    const Storage first = archive.read_prefix(member, 12);
    const Storage prefix = archive.read_prefix(member, detail::npy_prefix_size(first.bytes));
    const auto header = detail::parse_npy_header(prefix.bytes, path, where);
    if (header.kind == detail::NpyHeader::Kind::number)
      return Value(std::make_shared<Tensor>(
          detail::npy_tensor_unread(prefix.bytes, member.uncompressed_size, path, where)));
    // A string array is text, part of the tree: it is read whole either way.
  }
  const Storage bytes = archive.read(member);
  return detail::npy_value(bytes.bytes, bytes.owner, path, where);
}

}  // namespace

// np.savez_compressed deflates every array, and inflating is the whole cost of reading one; each
// member is an independent deflate stream, so members are inflated on several threads. The result
// and the error (that of the first bad member in archive order) do not depend on the thread count.
Value read_npz(const std::string& path, const ReadOptions& options) {
  auto file = detail::MappedFile::open(path);
  // np.load takes a file for an archive only when it starts with a local header or an end
  // record; a zip behind prepended bytes (which zipfile itself would open) is refused.
  const std::string_view start(reinterpret_cast<const char*>(file->data()),
                               std::min<std::size_t>(file->bytes().size(), 4));
  if (start != std::string_view("PK\x03\x04", 4) && start != std::string_view("PK\x05\x06", 4))
    throw Error(path, "byte 0",
                "not an .npz archive: it does not start with a zip local header or end record "
                "(as np.load requires)");
  const detail::ZipArchive archive(std::move(file));
  constexpr std::string_view suffix = ".npy";
  std::vector<const detail::ZipMember*> arrays;
  for (const auto& member : archive.members())
    if (std::string_view(member.name).ends_with(suffix)) arrays.push_back(&member);

  std::vector<Value> values(arrays.size());
  std::vector<std::exception_ptr> errors(arrays.size());
  // Members after a failed one need not be read: only the first failure is reported.
  std::atomic<std::size_t> first_failure{arrays.size()};
  detail::parallel_for_each(arrays.size(), options.threads, [&](std::uint64_t i) {
    if (i > first_failure.load(std::memory_order_relaxed)) return;
    try {
      values[i] = member_value(archive, *arrays[i], options);
    } catch (...) {
      errors[i] = std::current_exception();
      std::size_t seen = first_failure.load();
      while (i < seen && !first_failure.compare_exchange_weak(seen, i)) {
      }
    }
  });
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);
  // numpy reads every member through zipfile, which checks each one's CRC-32; stored members'
  // bytes are views, so theirs is checked here (deflated ones' while inflating).
  if (options.tensor_data) archive.check_stored_crcs(arrays, options.threads);

  auto dict = std::make_shared<Dict>();
  dict->items.reserve(arrays.size());
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const std::string_view name = arrays[i]->name;
    dict->items.emplace_back(std::string(name.substr(0, name.size() - suffix.size())),
                             std::move(values[i]));
  }
  return Value(std::move(dict));
}

}  // namespace gpucache
