// The .npy array header (numpy's format.py, versions 1.0, 2.0 and 3.0): magic, version, header
// length, then a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded to an aligned data start. Used for .npy files and for every member of an .npz archive.
// What is accepted is what numpy 1.24's read_array(allow_pickle=False) accepts, in the spellings
// numpy writes (src/inputs/npy/FORMAT.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpucache/column.hpp"
#include "gpucache/dtype.hpp"
#include "gpucache/value.hpp"

namespace gpucache::detail {

struct NpyHeader {
  // The elements: numbers of `dtype`, or strings ('<U8': UTF-32 code units, '|S8': bytes).
  enum class Kind { number, unicode, bytes };
  Kind kind = Kind::number;
  DType dtype = DType::f32;    // numbers only
  std::uint64_t itemsize = 4;  // bytes per element
  bool big_endian = false;     // only ever true for multi-byte numbers and for unicode
  bool fortran_order = false;
  // datetime64 ('<M8[us]') and timedelta64 ('<m8[ns]'): i64 numbers that mean this.
  std::optional<ColumnTime> time;
  std::vector<std::int64_t> shape;
  std::uint64_t data_offset = 0;  // from the start of the .npy bytes
  // Known once the data length is checked: in elements, and shape × itemsize.
  std::vector<std::int64_t> strides;
  std::uint64_t data_bytes = 0;
};

// numpy 1.24's limits: read_array refuses longer headers unless pickles are allowed, and arrays
// of more dimensions (NPY_MAXDIMS).
inline constexpr std::uint64_t kNpyMaxHeaderBytes = 10000;
inline constexpr std::size_t kNpyMaxRank = 32;
// String arrays become a list of str with a Value per element (about 40 bytes each, whatever
// the element's size): more elements than this are refused rather than risk a huge tree.
inline constexpr std::uint64_t kNpyMaxStrings = std::uint64_t{1} << 26;

// Maps a numpy type kind ('f', 'i', 'u', 'b') and item size to a DType; nullopt when gpucache
// has no such type. Shared with the pickle reader, which meets numpy dtypes as 'f4', 'i8', ...
std::optional<DType> numpy_dtype(char kind, std::uint64_t itemsize) noexcept;

// Parses the header of `bytes` (a whole .npy file or member, or a prefix of one that holds at
// least npy_prefix_size bytes). Errors name `file` and `where`. Refuses object arrays ('|O'),
// structured dtypes, dtypes gpucache has no type for, and anything numpy itself refuses.
NpyHeader parse_npy_header(std::span<const std::byte> bytes, const std::string& file,
                           const std::string& where = "npy header");

// How many leading bytes of a .npy hold its whole header, from its first 12 bytes (fewer when the
// file is shorter; parse_npy_header then says what is missing): what must be inflated of a
// compressed member to read its header.
std::uint64_t npy_prefix_size(std::span<const std::byte> first_bytes) noexcept;

// The array in `bytes` as a zero-copy tensor whose storage is kept alive by `owner`. Fortran-order
// arrays get column-major strides. The data must hold shape × itemsize bytes; any after them are
// ignored, as numpy ignores them. Refuses string arrays (npy_value reads them).
Tensor npy_tensor(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                  const std::string& file, const std::string& where = "npy header");

// The array in `bytes` as a Value: a tensor (as npy_tensor), or for a string array its elements as
// text: a str for a 0-d array, a list of str for a 1-d one, nested lists beyond, in row-major
// order. UTF-32 and bytes are decoded to UTF-8 with trailing NULs stripped as numpy strips them;
// a code point that is not Unicode, or bytes that are not UTF-8, are refused naming the element.
Value npy_value(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                const std::string& file, const std::string& where = "npy header");

// For a metadata-only read: the array whose first bytes are `prefix` (its header, at least
// npy_prefix_size bytes) and whose whole size is `total_size`, without its data. The header and
// the data length are checked as npy_tensor checks them; the tensor's storage is
// Storage::not_read. String arrays are refused here (their text is the value: read them whole).
Tensor npy_tensor_unread(std::span<const std::byte> prefix, std::uint64_t total_size,
                         const std::string& file, const std::string& where = "npy header");

}  // namespace gpucache::detail
