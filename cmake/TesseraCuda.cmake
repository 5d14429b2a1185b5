# TESSERA_CUDA=AUTO|ON|OFF: AUTO builds the CUDA path when CMake finds the toolkit, ON requires it.
# Sets TESSERA_HAS_CUDA. The CUDA path is chosen by source files (runtime/cuda_device.cpp versus
# runtime/no_cuda.cpp), never by #ifdef spread through the code.
set(TESSERA_HAS_CUDA OFF)
if(NOT TESSERA_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(TESSERA_HAS_CUDA ON)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Hopper SASS plus PTX so newer GPUs can JIT.
      set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)
    endif()
    message(STATUS "Tessera: CUDA path ON (toolkit ${CUDAToolkit_VERSION} at ${CUDAToolkit_BIN_DIR})")
  elseif(TESSERA_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TESSERA_CUDA=ON but CMake found no CUDA toolkit (set CUDAToolkit_ROOT)")
  else()
    message(STATUS "Tessera: CUDA path OFF (no CUDA toolkit found)")
  endif()
else()
  message(STATUS "Tessera: CUDA path OFF (TESSERA_CUDA=OFF)")
endif()
if(TESSERA_HAS_CUDA)
  target_link_libraries(tessera_private_deps INTERFACE CUDA::cudart)
endif()
