# Compiler flags for GPUCACHE_FUZZ=ON, included by the top-level CMakeLists.txt before any target
# is defined, so that every module library carries the coverage instrumentation libFuzzer needs.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "GPUCACHE_FUZZ=ON needs clang (libFuzzer): configure with "
                      "-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++")
endif()
if(NOT GPUCACHE_CUDA STREQUAL "OFF")
  message(FATAL_ERROR "GPUCACHE_FUZZ=ON needs -DGPUCACHE_CUDA=OFF (nvcc cannot build sanitized code)")
endif()
add_compile_options(
  $<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link,address,undefined>
  $<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=undefined>
  $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>
  $<$<COMPILE_LANGUAGE:C,CXX>:-g>)
add_link_options(-fsanitize=address,undefined)
