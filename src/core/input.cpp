// Kept apart from input_format.cpp: this file calls every reader, so linking it needs them all,
// while format detection alone does not.
#include "gpucache/input.hpp"
#include "gpucache/readers.hpp"

namespace gpucache {

Value read_input(const std::string& path) {
  switch (detect_input_format(path)) {
    case InputFormat::pt:
      return read_pt(path);
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
