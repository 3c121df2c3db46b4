#include "gpucache/npy.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <optional>

#include "gpucache/common/atomic_file.hpp"
#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/error.hpp"
#include "npy/npy_header.hpp"

namespace gpucache {

Value parse_npy(std::span<const std::byte> file, std::shared_ptr<const void> owner,
                const std::string& origin) {
  return detail::npy_value(file, std::move(owner), origin);
}

Value read_npy(const std::string& path, const ReadOptions&) {
  auto file = detail::MappedFile::open(path);
  return parse_npy(file->bytes(), file, path);
}

std::string npy_descr(DType dtype) {
  const DTypeInfo* info = dtype_info(dtype);
  if (info == nullptr || info->numpy_kind == 0)
    throw Error("", "", std::string("numpy has no dtype for ") + std::string(dtype_name(dtype)));
  const char kind = info->numpy_kind;
  const std::size_t size = dtype_size(dtype);
  // Built in place: g++ 12 warns (-Wrestrict, a false positive) on `"<" + std::string(...)` here.
  std::string descr(1, size == 1 ? '|' : '<');
  descr += kind;
  descr += std::to_string(size);
  return descr;
}

std::string npy_prefix(DType dtype, const std::vector<std::uint64_t>& shape) {
  return npy_prefix(npy_descr(dtype), shape);
}

std::string npy_prefix(const std::string& descr, const std::vector<std::uint64_t>& shape) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i)
    header += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) header += ",";  // a 1-tuple is "(3,)" in Python
  header += "), }";
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string prefix("\x93NUMPY\x01\x00", 8);
  prefix += static_cast<char>(header.size() & 0xff);
  prefix += static_cast<char>(header.size() >> 8);
  return prefix + header;
}

void write_npy(
    const std::string& path, DType dtype, const std::vector<std::uint64_t>& shape,
    const std::function<void(std::span<std::byte>, std::uint64_t, std::uint64_t)>& fill) {
  detail::AtomicFile file(path);
  const std::string prefix = npy_prefix(dtype, shape);
  file.write(std::as_bytes(std::span(prefix.data(), prefix.size())));

  const std::uint64_t rows = shape.empty() ? 1 : shape[0];
  std::uint64_t row_bytes = dtype_size(dtype);
  for (std::size_t i = 1; i < shape.size(); ++i) row_bytes *= shape[i];
  const std::uint64_t block_rows =
      std::max<std::uint64_t>(1, (8ull << 20) / std::max<std::uint64_t>(row_bytes, 1));
  std::vector<std::byte> block;
  for (std::uint64_t first = 0; first < rows; first += block_rows) {
    const std::uint64_t count = std::min(block_rows, rows - first);
    block.resize(count * row_bytes);
    fill(block, first, count);
    file.write(block);
  }
  file.commit();
}

}  // namespace gpucache
