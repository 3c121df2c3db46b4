// The libFuzzer entry point of one target: fuzz/CMakeLists.txt compiles this file once per target
// with GPUCACHE_FUZZ_TARGET set to the function's name in targets.hpp.
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpucache::fuzz::GPUCACHE_FUZZ_TARGET({reinterpret_cast<const std::byte*>(data), size});
  return 0;
}
