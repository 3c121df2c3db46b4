// Kept apart from input_format.cpp: this file calls every reader, so linking it needs them all,
// while format detection alone does not.
#include "gpucache/input.hpp"
#include "gpucache/pt.hpp"
#include "gpucache/readers.hpp"

namespace gpucache {

Value read_input(const std::string& path) {
  return read_input(path, ReadOptions{});
}

Value read_input(const std::string& path, const ReadOptions& options) {
  switch (detect_input_format(path)) {
    case InputFormat::pt:
      return read_pt(path, options);
    case InputFormat::safetensors:
      return read_safetensors(path);
    case InputFormat::npy:
      return read_npy(path);
    case InputFormat::npz:
      return read_npz(path);
    case InputFormat::jsonl:
      return read_jsonl(path);
  }
  return {};
}

}  // namespace gpucache
