# Third-party dependencies, all from Debian packages (tools/install-deps.sh).
find_package(Threads REQUIRED)
find_package(fmt 9 REQUIRED)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(dnnl REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)

# Headers every public Tessera header may include: fmt (formatting of Tensor, Shape, ...).
add_library(tessera_headers INTERFACE)
target_include_directories(tessera_headers INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
  $<INSTALL_INTERFACE:include/tessera>)
target_compile_features(tessera_headers INTERFACE cxx_std_20)
target_link_libraries(tessera_headers INTERFACE fmt::fmt Threads::Threads)

# What only the library's own sources need.
add_library(tessera_private_deps INTERFACE)
target_link_libraries(tessera_private_deps INTERFACE Eigen3::Eigen DNNL::dnnl OpenMP::OpenMP_CXX)

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
