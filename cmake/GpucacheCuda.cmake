# Decides whether the CUDA backend is built (GPUCACHE_CUDA=AUTO|ON|OFF) and sets GPUCACHE_HAVE_CUDA.
# Included only by src/validate/kernels/CMakeLists.txt, the one folder with CUDA sources, so that is
# the one place that enables the CUDA language. Public headers never include CUDA headers.
set(GPUCACHE_HAVE_CUDA OFF)
if(NOT GPUCACHE_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # CUDAARCHS in the environment chooses too (scripts/test.sh sets it for `pip install .` as
    # scripts/build.sh chooses). It is read here rather than left to enable_language, which reads
    # it only on a build directory's first configure: a later `pip install .` with CUDAARCHS
    # would otherwise find the language enabled and no architectures at all.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      if(DEFINED ENV{CUDAARCHS})
        set(CMAKE_CUDA_ARCHITECTURES "$ENV{CUDAARCHS}")
      else()
        # Code for the GPUs this machine has ("native": one architecture, minutes less than a
        # list), else one portable target: PTX for sm_80, which every GPU from Ampere on compiles
        # when it loads the kernels. A wheel meant for other machines names its list
        # (CUDAARCHS="80-real;90-real;120-virtual" or -DCMAKE_CUDA_ARCHITECTURES=...).
        execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE gpucache_smi_status
                        OUTPUT_VARIABLE gpucache_smi_gpus ERROR_QUIET)
        if(gpucache_smi_status EQUAL 0 AND gpucache_smi_gpus MATCHES "GPU [0-9]")
          set(CMAKE_CUDA_ARCHITECTURES native)
        else()
          set(CMAKE_CUDA_ARCHITECTURES 80-virtual)
        endif()
      endif()
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # CMake 3.25 does not know the C++20 flag for nvcc 13; kernels are written in C++17.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(GPUCACHE_HAVE_CUDA ON)
    message(STATUS "gpucache: CUDA backend ON (architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(GPUCACHE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "GPUCACHE_CUDA=ON but no CUDA compiler was found; install the CUDA toolkit or set GPUCACHE_CUDA=OFF")
  else()
    message(STATUS "gpucache: no CUDA compiler found, building the CPU backend only")
  endif()
else()
  message(STATUS "gpucache: CUDA backend OFF")
endif()
