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
# libFuzzer's convention for code that must behave differently under the fuzzer: the Parquet
# reader lowers its decoded-size floor below -malloc_limit_mb (inputs/parquet/parquet_chunk.cpp).
add_compile_definitions(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
