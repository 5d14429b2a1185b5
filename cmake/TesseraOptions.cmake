# Compiler flags, sanitizers, ccache.
#
# Note [One library per folder]
# Each top-level folder is an OBJECT library (tessera_runtime, tessera_kernels, ...) so that a
# folder's sources build with exactly the dependencies DESIGN.md allows it; the objects are
# linked into the single shared library Tessera::tessera that users consume.

find_program(TESSERA_CCACHE ccache)
if(TESSERA_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${TESSERA_CCACHE})
endif()

add_library(tessera_warnings INTERFACE)
# C++ sources only: nvcc has its own warning flags (kernels/CMakeLists.txt passes these through).
target_compile_options(tessera_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor>)
if(TESSERA_WERROR)
  target_compile_options(tessera_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

if(TESSERA_SANITIZE)
  add_compile_options(-fsanitize=${TESSERA_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${TESSERA_SANITIZE})
endif()
