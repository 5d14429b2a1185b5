# tessera_onednn_prerequisites_missing(<out>): sets <out> to a sentence naming what oneDNN's CMake
# package needs and this machine lacks (with the Debian package that brings it), or to "" when
# find_package(dnnl) can run.
#
# Why: Debian's libdnnl-dev is built with the OpenCL GPU runtime, and its dnnl-config.cmake calls
# find_package(OpenCL REQUIRED). libdnnl-dev only *recommends* ocl-icd-opencl-dev, so an install
# with --no-install-recommends leaves it out, and even find_package(dnnl QUIET) then stops the
# configure step with OpenCL's error, which names neither oneDNN nor the package to install.
# tools/install-deps.sh installs ocl-icd-opencl-dev; this check covers machines set up otherwise.
function(tessera_onednn_prerequisites_missing out)
  set(${out} "" PARENT_SCOPE)
  find_library(TESSERA_DNNL_LIBRARY NAMES dnnl)
  if(NOT TESSERA_DNNL_LIBRARY)
    return()  # no oneDNN at all: find_package(dnnl) reports that in its own words
  endif()
  get_filename_component(lib_dir "${TESSERA_DNNL_LIBRARY}" DIRECTORY)
  set(config "${lib_dir}/cmake/dnnl/dnnl-config.cmake")
  if(NOT EXISTS "${config}")
    return()
  endif()
  file(READ "${config}" config_text)
  string(FIND "${config_text}" "find_package(OpenCL REQUIRED)" needs_opencl)
  if(needs_opencl EQUAL -1)
    return()
  endif()
  find_package(OpenCL QUIET)
  if(NOT OpenCL_FOUND)
    string(CONCAT missing
        "oneDNN's CMake package (${config}) requires OpenCL headers and libOpenCL, which are "
        "missing: install the Debian package ocl-icd-opencl-dev (tools/install-deps.sh does), or "
        "configure with -DTESSERA_ONEDNN=OFF")
    set(${out} "${missing}" PARENT_SCOPE)
  endif()
endfunction()
