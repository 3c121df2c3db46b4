// NumPy .npy files: reading (zero-copy from a memory map) and writing (for `gpucache export`).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpucache/dtype.hpp"
#include "gpucache/readers.hpp"
#include "gpucache/value.hpp"

namespace gpucache {

// Parses the .npy bytes in `file`: numbers become a Tensor whose storage points into `file` (kept
// alive by owner), strings ('<U8', '|S8') text: a str, or a list of str per dimension. Handles
// format versions 1-3, little- and big-endian, C and Fortran order. Refuses object and structured
// dtypes, and whatever numpy's read_array refuses. `origin` names the file in errors.
Value parse_npy(std::span<const std::byte> file, std::shared_ptr<const void> owner,
                const std::string& origin);
// Maps path and returns its array (src/inputs/npy/FORMAT.md). Ignores `options`: the array is a
// view of the map, so there is no work to share out and nothing to skip for metadata only.
Value read_npy(const std::string& path, const ReadOptions& options = {});

// Writes a C-order little-endian .npy atomically. fill(out, first_row, rows) writes `rows` rows of
// row_bytes each into out, and is called with blocks of rows so memory stays bounded.
// Types numpy lacks (bf16) must be converted by the caller first.
void write_npy(const std::string& path, DType dtype, const std::vector<std::uint64_t>& shape,
               const std::function<void(std::span<std::byte> out, std::uint64_t first_row,
                                        std::uint64_t rows)>& fill);
// The numpy descr of a dtype ("<f4", "|b1", ...); throws for types numpy does not have.
std::string npy_descr(DType dtype);
// The bytes before a .npy's data (format version 1.0): magic, header length and the header dict,
// padded with spaces so the data starts on a 64-byte boundary, as numpy writes it.
std::string npy_prefix(DType dtype, const std::vector<std::uint64_t>& shape);
// The same for a numpy type string of its own ("<M8[us]": dates and times, which export writes).
std::string npy_prefix(const std::string& descr, const std::vector<std::uint64_t>& shape);

}  // namespace gpucache
