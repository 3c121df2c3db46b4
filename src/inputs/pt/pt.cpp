#include "gpucache/pt.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstring>
#include <exception>
#include <future>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "gpucache/common/error_text.hpp"
#include "gpucache/error.hpp"
#include "pt/pickle_text.hpp"
#include "pt/pt_readers.hpp"
#include "zip/zip.hpp"

namespace gpucache {
namespace detail {
namespace {

// Unpickling a torch.save list of dicts builds and frees millions of small objects; with glibc's
// fastbins every large free then consolidates them all (a quarter of the time of packing a
// 100k-row dialogue file). Without fastbins small blocks still come from the thread cache. The
// setting is process-wide, so it is made once, here, where those allocations happen: the CLI and
// library users (the Python package) get the same speed.
void tune_allocator_once() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] { mallopt(M_MXFAST, 0); });
#endif
}

constexpr std::uint64_t kMaxFormatVersion = 10;  // caffe2 kMaxSupportedFileFormatVersion

// The folder every record sits in, "<name>/", named after the file by torch ("archive/" by
// default). torch.load takes it from the archive's first record, which must lie in a folder; its
// data.pkl must be there. A data.pkl in any other folder at depth <= 1 is refused as ambiguous.
std::string find_prefix(const ZipArchive& archive) {
  if (archive.members().empty())
    throw Error(archive.path(), "", "zip archive has no records: not a torch.save file");
  const std::string& first = archive.members().front().name;
  const auto slash = first.find('/');
  if (slash == std::string::npos)
    throw Error(archive.path(), "member " + escaped(first),
                "the first record is not in a folder, as torch.save puts every record: not a "
                "torch.save file");
  std::string prefix = first.substr(0, slash + 1);
  if (!archive.find(prefix + "data.pkl"))
    throw Error(archive.path(), "",
                "zip archive has no " + escaped(prefix) + "data.pkl record: not a torch.save file");
  constexpr std::string_view pickle = "data.pkl";
  for (const auto& member : archive.members()) {
    const std::string_view name = member.name;
    if (!name.ends_with(pickle) || name.substr(0, name.size() - pickle.size()) == prefix) continue;
    const auto folder = name.substr(0, name.size() - pickle.size());
    if (folder.empty() || (folder.back() == '/' && folder.find('/') == folder.size() - 1))
      throw Error(archive.path(), "member " + escaped(member.name),
                  "second data.pkl record (first: " + escaped(prefix) + "data.pkl)");
  }
  return prefix;
}

// The records named <stem><n> for canonical decimal n, by n: torch numbers storages 0, 1, 2, ...
// so one pass over the directory replaces a search for each storage (a file may hold one per row).
// Numbers beyond 4 per member are left to ZipArchive::find, so the vector stays small.
std::vector<const ZipMember*> numbered_records(const ZipArchive& archive, std::string_view stem) {
  std::vector<const ZipMember*> records;
  const std::uint64_t limit = 4 * static_cast<std::uint64_t>(archive.members().size()) + 4096;
  for (const auto& member : archive.members()) {
    const std::string_view name = member.name;
    if (!name.starts_with(stem)) continue;
    const auto number = pickle::canonical_decimal(name.substr(stem.size()), limit);
    if (!number) continue;
    if (*number >= records.size()) records.resize(*number + 1, nullptr);
    records[*number] = &member;
  }
  return records;
}

std::string_view as_text(const Storage& storage) {
  return {reinterpret_cast<const char*>(storage.bytes.data()), storage.bytes.size()};
}

void check_version(const ZipArchive& archive, const std::string& prefix) {
  const ZipMember* member = archive.find(prefix + "version");
  if (!member) member = archive.find(prefix + ".data/version");
  if (!member) throw Error(archive.path(), "", "torch archive has no version record");
  const Storage bytes = archive.read(*member);
  std::string_view text = as_text(bytes);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.remove_suffix(1);
  std::uint64_t version = 0;
  bool valid = !text.empty() && text.size() <= 4;
  for (char c : text) {
    if (c < '0' || c > '9')
      valid = false;
    else
      version = version * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (!valid || version < 1 || version > kMaxFormatVersion)
    throw Error(archive.path(), "member " + escaped(member->name),
                "unsupported torch archive version " + quoted(text, 16, '\''));
}

bool read_big_endian(const ZipArchive& archive, const std::string& prefix) {
  const ZipMember* member = archive.find(prefix + "byteorder");
  if (!member) return false;  // written since torch 1.x; older archives are little-endian
  const Storage bytes = archive.read(*member);
  const std::string_view text = as_text(bytes);
  if (text == "little") return false;
  if (text == "big") return true;
  throw Error(archive.path(), "member " + escaped(member->name),
              "byte order must be 'little' or 'big', not " + quoted(text, 16, '\''));
}

}  // namespace

// torch writes data.pkl as the archive's first record, so its pickle can run while another thread
// reads the rest of the directory: a record per storage, which for a dataset saved as a list of
// rows is one or two per row. The early result is used only if the parsed archive names that same
// record its data.pkl; errors come in the same order as without the thread (the archive's first).
Value read_pt_zip(const std::shared_ptr<const MappedFile>& file, const ReadOptions& read_options) {
  PickleOptions options;
  options.file = file->path();
  options.name = "data.pkl";
  std::optional<ZipMember> first;
  if (read_options.threads != 1) first = ZipArchive::first_member(*file);
  const bool early =
      first && first->name.ends_with("data.pkl") && ZipArchive::readable_in_place(*first);
  std::future<ZipArchive> parsing;
  std::optional<PickleResult> early_result;
  std::exception_ptr early_error;
  if (early) {
    parsing = std::async(std::launch::async, [file] { return ZipArchive(file); });
    try {
      early_result =
          unpickle(file->bytes().subspan(first->data_offset, first->uncompressed_size), options);
    } catch (...) {
      early_error = std::current_exception();
    }
  }
  const ZipArchive archive = early ? parsing.get() : ZipArchive(file);
  const std::string prefix = find_prefix(archive);
  check_version(archive, prefix);
  const bool big_endian = read_big_endian(archive, prefix);
  const ZipMember& pickle_member = *archive.find(prefix + "data.pkl");
  const bool early_is_pickle =
      early && pickle_member.local_header_offset == first->local_header_offset;
  if (early_is_pickle && early_error) std::rethrow_exception(early_error);
  PickleResult result = early_is_pickle ? std::move(*early_result)
                                        : unpickle(archive.read(pickle_member).bytes, options);

  std::string name = prefix + "data/";
  const std::size_t name_stem = name.size();
  const auto numbered = numbered_records(archive, name);
  for (auto& storage : result.storages) {
    const auto number = pickle::canonical_decimal(storage.key, numbered.size());
    const ZipMember* member = number ? numbered[*number] : nullptr;
    name.resize(name_stem);
    name += storage.key;
    if (member == nullptr) member = archive.find(name);
    if (!member)
      throw Error(file->path(), "member " + escaped(name),
                  "record for storage " + quoted(storage.key, kShownChars, '\'') +
                      " named in data.pkl is missing");
    if (member->uncompressed_size != storage.nbytes)
      throw Error(file->path(), "member " + escaped(name),
                  "holds " + std::to_string(member->uncompressed_size) +
                      " bytes but data.pkl declares " + std::to_string(storage.numel) + " " +
                      std::string(dtype_name(storage.dtype)) + " elements (" +
                      std::to_string(storage.nbytes) + " bytes)");
    // For metadata only, a compressed record stays compressed (torch stores every record, but a
    // rewritten archive may deflate them: a bomb must not be inflated to be probed).
    if (!read_options.tensor_data && member->method != 0) {
      (void)archive.read_prefix(*member, 0);  // refuses what read would: encryption, methods
      *storage.storage = Storage::not_read(storage.nbytes);
      continue;
    }
    *storage.storage = archive.read(*member);
  }
  if (big_endian)
    for (const auto& tensor : result.storage_tensors)
      tensor->big_endian = dtype_size(tensor->dtype) > 1;
  check_storage_tensors(result, file->path());
  return std::move(result.value);
}

namespace {

std::string shape_text(const std::vector<std::int64_t>& values) {
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

// A view whose elements repeat (stride 0, or strides that overlap) may name far more elements
// than its storage holds: [2^40, D] from one row is a 1 KB file. Reading it is work that grows
// with its elements, not with the file, so beyond kMaxRepeatedViewBytes it is refused, at once.
void check_repeated_view(const Tensor& tensor, const std::string& path) {
  const std::uint64_t storage_bytes = tensor.storage ? tensor.storage->size() : 0;
  const std::uint64_t nbytes = tensor.nbytes();  // check_bounds made sure it fits 64 bits
  if (nbytes <= storage_bytes || nbytes <= kMaxRepeatedViewBytes) return;
  std::string why = "overlapping strides " + shape_text(tensor.strides);
  for (std::size_t i = 0; i < tensor.shape.size(); ++i)
    if (tensor.strides[i] == 0 && tensor.shape[i] > 1) {
      why = "stride 0 in dimension " + std::to_string(i);
      break;
    }
  throw Error(
      path, "tensor " + shape_text(tensor.shape) + " " + std::string(dtype_name(tensor.dtype)),
      "is a view that repeats its storage's elements (" + why + "): " + std::to_string(nbytes) +
          " bytes from a storage of " + std::to_string(storage_bytes) + ", beyond the limit of " +
          std::to_string(kMaxRepeatedViewBytes) +
          " bytes for repeating views; save tensor.contiguous() if it is meant to be that "
          "large");
}

}  // namespace

void check_storage_tensors(const PickleResult& result, const std::string& path) {
  for (const auto& tensor : result.storage_tensors) {
    tensor->check_bounds(path);
    check_repeated_view(*tensor, path);
  }
}

}  // namespace detail

Value read_pt(const std::string& path, const ReadOptions& options) {
  detail::tune_allocator_once();
  auto file = detail::MappedFile::open(path);
  const auto bytes = file->bytes();
  const bool zip_magic = bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0;
  if (zip_magic) return detail::read_pt_zip(file, options);
  // Legacy files open with the magic-number pickle: PROTO, then the number as LONG1.
  if (bytes.size() >= 2 && bytes[0] == std::byte{0x80}) return detail::read_pt_legacy(file);
  throw Error(path, "",
              "not a torch.save file: neither a zip archive nor a legacy pickle (" +
                  std::to_string(bytes.size()) + " bytes)");
}

}  // namespace gpucache
