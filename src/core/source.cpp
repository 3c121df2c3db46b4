#include "src/core/source.hpp"

#include <filesystem>

#include "gpucache/error.hpp"
#include "gpucache/npy.hpp"

namespace gpucache::detail {
namespace {

SourceColumn tensor_column(std::string name, std::shared_ptr<Tensor> tensor) {
  SourceColumn column;
  column.name = std::move(name);
  column.dtype = tensor->dtype;
  column.rank = tensor->shape.size() == 2 ? 2 : 1;
  column.dim = column.rank == 2 ? static_cast<std::uint64_t>(tensor->shape[1]) : 1;
  const std::uint64_t dim = column.dim;
  column.read_rows = [tensor, dim](std::uint64_t first, std::uint64_t, std::span<std::byte> out) {
    tensor->copy_row_major(first * dim, out);
  };
  return column;
}

}  // namespace

Source open_source(const std::string& path) {
  const auto extension = std::filesystem::path(path).extension().string();
  if (extension != ".npy")
    throw Error(path, "", "unsupported input type '" + extension + "' (expected .npy)");
  Source source;
  source.path = path;
  source.root = read_npy(path);
  auto tensor = std::get<std::shared_ptr<Tensor>>(source.root.data);
  if (tensor->shape.size() != 2)
    throw Error(
        path, "npy header",
        "expected an [N, D] array, found " + std::to_string(tensor->shape.size()) + " dimensions");
  if (!dtype_is_float(tensor->dtype))
    throw Error(
        path, "npy header",
        "expected a float array for embeddings, found " + std::string(dtype_name(tensor->dtype)));
  source.rows = static_cast<std::uint64_t>(tensor->shape[0]);
  source.columns.push_back(tensor_column("embedding", tensor));
  return source;
}

}  // namespace gpucache::detail
