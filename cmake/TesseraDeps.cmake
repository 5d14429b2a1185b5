# Third-party dependencies: Debian packages (tools/install-deps.sh), or, on a machine without
# them (the GPU machine), the header-only ones from the folder tools/prepare-gpu-deps.sh fills.
#
# TESSERA_DEPS_DIR: when set, Eigen, fmt, Catch2, DLPack, nlohmann-json and xxHash come only from that
# folder (NO_DEFAULT_PATH), so a build there never mixes in other copies; fmt is then used
# header-only (FMT_HEADER_ONLY). CLI11, which only the tools use, is found in tools/CMakeLists.txt
# the same way.
# TESSERA_ONEDNN=AUTO|ON|OFF: oneDNN's matmul primitive for the CPU float matmul. AUTO uses it
# when found; without it kernels/cpu/no_onednn_matmul.cpp makes the CPU matmul take another
# path (OpenBLAS or Eigen for float32). Sets TESSERA_HAS_ONEDNN.
# TESSERA_OPENBLAS=AUTO|ON|OFF: OpenBLAS's cblas_sgemm as a CPU float32 GEMM backend, chosen per
# shape by measurement (Note [CPU float32 GEMM choice] in kernels/cpu/linalg.cpp). AUTO uses it
# when found; without it kernels/cpu/no_openblas_matmul.cpp declines every problem. Sets
# TESSERA_HAS_OPENBLAS.
set(TESSERA_DEPS_DIR "" CACHE PATH
    "Folder made by tools/prepare-gpu-deps.sh; when set, Eigen, fmt, Catch2, DLPack, nlohmann-json and xxHash come only from it")
set(TESSERA_ONEDNN AUTO CACHE STRING "Use oneDNN for the CPU float matmul: AUTO, ON or OFF")
set_property(CACHE TESSERA_ONEDNN PROPERTY STRINGS AUTO ON OFF)
set(TESSERA_OPENBLAS AUTO CACHE STRING "Use OpenBLAS for the CPU float32 matmul: AUTO, ON or OFF")
set_property(CACHE TESSERA_OPENBLAS PROPERTY STRINGS AUTO ON OFF)

include(${CMAKE_CURRENT_LIST_DIR}/OneDnnPrerequisites.cmake)

find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)

if(TESSERA_DEPS_DIR)
  if(NOT EXISTS "${TESSERA_DEPS_DIR}/README.md")
    message(FATAL_ERROR "TESSERA_DEPS_DIR=${TESSERA_DEPS_DIR} is not a folder made by "
                        "tools/prepare-gpu-deps.sh (no README.md there)")
  endif()
  find_package(Eigen3 3.4 REQUIRED NO_MODULE PATHS "${TESSERA_DEPS_DIR}" NO_DEFAULT_PATH)
  find_package(fmt 9 QUIET CONFIG PATHS "${TESSERA_DEPS_DIR}" NO_DEFAULT_PATH)
  if(NOT fmt_FOUND)
    find_path(TESSERA_FMT_INCLUDE_DIR fmt/format-inl.h PATHS "${TESSERA_DEPS_DIR}/include"
              NO_DEFAULT_PATH REQUIRED)
    # IMPORTED, so that the install export of tessera_headers names fmt::fmt instead of requiring
    # this target in its export set.
    add_library(fmt::fmt INTERFACE IMPORTED GLOBAL)
    set_target_properties(fmt::fmt PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${TESSERA_FMT_INCLUDE_DIR}"
      INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
    set(tessera_fmt_from "${TESSERA_FMT_INCLUDE_DIR}/fmt (header-only)")
  else()
    set(tessera_fmt_from "${fmt_DIR}")
  endif()
  if(TESSERA_BUILD_TESTS)
    # Sets Catch2_DIR, which tests/CMakeLists.txt's find_package(Catch2) then reuses.
    find_package(Catch2 2 REQUIRED CONFIG PATHS "${TESSERA_DEPS_DIR}" NO_DEFAULT_PATH)
  endif()
  find_package(dlpack REQUIRED CONFIG PATHS "${TESSERA_DEPS_DIR}" NO_DEFAULT_PATH)
  find_package(nlohmann_json 3 REQUIRED CONFIG PATHS "${TESSERA_DEPS_DIR}" NO_DEFAULT_PATH)
  find_path(TESSERA_XXHASH_INCLUDE_DIR xxhash.h PATHS "${TESSERA_DEPS_DIR}/include" NO_DEFAULT_PATH
            REQUIRED)
  message(STATUS "Tessera: dependencies from TESSERA_DEPS_DIR: Eigen3 ${Eigen3_DIR}; "
                 "fmt ${tessera_fmt_from}; Catch2 ${Catch2_DIR}; dlpack ${dlpack_DIR}")
else()
  find_package(fmt 9 REQUIRED)
  find_package(Eigen3 3.4 REQUIRED NO_MODULE)
  # Debian's libdlpack-dev (header-only, DLPack 0.6); runtime/dlpack.h adds what 1.x declares.
  find_package(dlpack REQUIRED CONFIG)
  # JSON (checkpoint metadata, tessera-shardbench --json): Debian's nlohmann-json3-dev,
  # header-only.
  find_package(nlohmann_json 3 REQUIRED CONFIG)
  # XXH3 checksums of checkpoint chunks: Debian's libxxhash-dev, used header-only.
  find_path(TESSERA_XXHASH_INCLUDE_DIR xxhash.h)
  if(NOT TESSERA_XXHASH_INCLUDE_DIR)
    message(FATAL_ERROR "Tessera: xxhash.h not found: install libxxhash-dev (tools/install-deps.sh)")
  endif()
endif()

# Note [One include root]
# Every Tessera header is included as "tessera/<folder>/<file>.h", in the library as in the
# engines that use it, and the only include directory Tessera gives a consumer is the one that
# holds tessera/: an engine's own runtime/error.h (a common folder name) can never be taken for
# Tessera's, nor the reverse. Installed, that is include/ with include/tessera/runtime/...; in the
# build tree, build/include, whose tessera/ links each source folder (the sources keep their
# repository paths, which the Notes and docs cite).
set(TESSERA_BUILD_INCLUDE_DIR ${PROJECT_BINARY_DIR}/include)
file(MAKE_DIRECTORY ${TESSERA_BUILD_INCLUDE_DIR}/tessera)
foreach(entry runtime autograd collectives dtensor checkpoint kernels tessera/tessera.h)
  get_filename_component(name ${entry} NAME)
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${entry} ${TESSERA_BUILD_INCLUDE_DIR}/tessera/${name}
       SYMBOLIC)
endforeach()

# Headers every public Tessera header may include: fmt (formatting of Tensor, Shape, ...) and
# DLPack's structs (runtime/interop.h).
add_library(tessera_headers INTERFACE)
target_include_directories(tessera_headers INTERFACE
  $<BUILD_INTERFACE:${TESSERA_BUILD_INCLUDE_DIR}>
  $<INSTALL_INTERFACE:include>)
target_compile_features(tessera_headers INTERFACE cxx_std_20)
target_link_libraries(tessera_headers INTERFACE fmt::fmt dlpack::dlpack Threads::Threads)
# fmt 9 drops constexpr from its functions under nvcc (__NVCC__), and its C++20 code then calls
# them from constexpr ones, which both nvcc 13's front end and g++ reject; nvcc 13 handles fmt's
# constexpr code, so CUDA sources keep it on.
target_compile_definitions(tessera_headers INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:FMT_USE_CONSTEXPR=1>)

# What only the library's own sources need (header-only ones are not in the installed
# package's interface).
add_library(tessera_private_deps INTERFACE)
target_link_libraries(tessera_private_deps INTERFACE Eigen3::Eigen OpenMP::OpenMP_CXX)
add_library(tessera_checkpoint_deps INTERFACE)
target_link_libraries(tessera_checkpoint_deps INTERFACE $<BUILD_INTERFACE:nlohmann_json::nlohmann_json>)
target_include_directories(tessera_checkpoint_deps SYSTEM INTERFACE
                           $<BUILD_INTERFACE:${TESSERA_XXHASH_INCLUDE_DIR}>)

set(TESSERA_HAS_ONEDNN OFF)
if(NOT TESSERA_ONEDNN STREQUAL "OFF")
  tessera_onednn_prerequisites_missing(tessera_onednn_missing)
  if(tessera_onednn_missing AND TESSERA_ONEDNN STREQUAL "ON")
    message(FATAL_ERROR "Tessera: TESSERA_ONEDNN=ON, but ${tessera_onednn_missing}")
  elseif(tessera_onednn_missing)
    message(WARNING "Tessera: building without oneDNN (OpenBLAS or Eigen's matmul instead): "
                    "${tessera_onednn_missing}")
  elseif(TESSERA_ONEDNN STREQUAL "ON")
    find_package(dnnl REQUIRED)
  else()
    find_package(dnnl QUIET)
  endif()
  if(dnnl_FOUND)
    set(TESSERA_HAS_ONEDNN ON)
    target_link_libraries(tessera_private_deps INTERFACE DNNL::dnnl)
  endif()
endif()
if(TESSERA_HAS_ONEDNN)
  message(STATUS "Tessera: oneDNN CPU matmul ON (${dnnl_DIR})")
else()
  message(STATUS "Tessera: oneDNN CPU matmul OFF (TESSERA_ONEDNN=${TESSERA_ONEDNN})")
endif()

# OpenBLAS: Debian's libopenblas-dev, through its pkg-config file (it points at the selected
# variant, pthread or OpenMP), else a plain libopenblas beside cblas.h.
set(TESSERA_HAS_OPENBLAS OFF)
if(NOT TESSERA_OPENBLAS STREQUAL "OFF")
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(TESSERA_OPENBLAS_PC QUIET IMPORTED_TARGET openblas)
  endif()
  if(TESSERA_OPENBLAS_PC_FOUND)
    set(TESSERA_HAS_OPENBLAS ON)
    target_link_libraries(tessera_private_deps INTERFACE PkgConfig::TESSERA_OPENBLAS_PC)
    set(tessera_openblas_from "pkg-config openblas ${TESSERA_OPENBLAS_PC_VERSION}")
  else()
    find_library(TESSERA_OPENBLAS_LIBRARY openblas)
    find_path(TESSERA_OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas)
    if(TESSERA_OPENBLAS_LIBRARY AND TESSERA_OPENBLAS_INCLUDE_DIR)
      set(TESSERA_HAS_OPENBLAS ON)
      add_library(tessera_openblas INTERFACE)
      target_include_directories(tessera_openblas INTERFACE ${TESSERA_OPENBLAS_INCLUDE_DIR})
      target_link_libraries(tessera_openblas INTERFACE ${TESSERA_OPENBLAS_LIBRARY})
      target_link_libraries(tessera_private_deps INTERFACE tessera_openblas)
      set(tessera_openblas_from "${TESSERA_OPENBLAS_LIBRARY}")
    endif()
  endif()
  if(NOT TESSERA_HAS_OPENBLAS AND TESSERA_OPENBLAS STREQUAL "ON")
    message(FATAL_ERROR "Tessera: TESSERA_OPENBLAS=ON, but OpenBLAS was not found "
                        "(Debian: libopenblas-dev)")
  endif()
endif()
if(TESSERA_HAS_OPENBLAS)
  message(STATUS "Tessera: OpenBLAS CPU float32 GEMM ON (${tessera_openblas_from})")
else()
  message(STATUS "Tessera: OpenBLAS CPU float32 GEMM OFF (TESSERA_OPENBLAS=${TESSERA_OPENBLAS})")
endif()

# MPI (the collectives' mpi backend): TESSERA_MPI=AUTO uses it when found, ON requires it, OFF
# leaves it out (init_process_group then explains that the mpi backend is not built).
set(TESSERA_MPI AUTO CACHE STRING "Build the MPI collectives backend: AUTO, ON or OFF")
set_property(CACHE TESSERA_MPI PROPERTY STRINGS AUTO ON OFF)
set(TESSERA_HAVE_MPI OFF)
if(NOT TESSERA_MPI STREQUAL "OFF")
  set(MPI_CXX_SKIP_MPICXX ON)  # the C API only, not the deprecated C++ bindings
  if(TESSERA_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS CXX)
  else()
    find_package(MPI COMPONENTS CXX)
  endif()
  if(MPI_CXX_FOUND)
    set(TESSERA_HAVE_MPI ON)
    target_link_libraries(tessera_private_deps INTERFACE MPI::MPI_CXX)
  endif()
endif()
