# The package an engine finds with find_package(Tessera): the shared library, its headers and
# CMake files, relocatable (paths relative to the prefix). A static Tessera is for builds that
# include its sources (add_subdirectory, FetchContent): its private dependencies (oneDNN,
# OpenBLAS, MPI, OpenMP, CUDA) would have to be found again by every consumer.
if(NOT TESSERA_SHARED)
  message(STATUS "Tessera: TESSERA_SHARED=OFF, so no install rules (use the shared library to install)")
  return()
endif()
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS tessera tessera_headers EXPORT TesseraTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Public headers under include/tessera/, the package's only include directory (Note [One include
# root] in cmake/TesseraDeps.cmake): <tessera/tessera.h>, <tessera/runtime/tensor.h>, ...
install(DIRECTORY runtime autograd collectives dtensor checkpoint DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera
  FILES_MATCHING PATTERN "*.h")
install(FILES tessera/tessera.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera)
install(EXPORT TesseraTargets NAMESPACE Tessera:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera)
configure_package_config_file(cmake/TesseraConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/TesseraConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/TesseraConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/TesseraConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/TesseraConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera)
