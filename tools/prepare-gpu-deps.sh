#!/usr/bin/env bash
# Copies the header-only dependencies of a Tessera build (Eigen 3.4, fmt 9, Catch2 2.x, DLPack, nlohmann-json, xxHash, CLI11) from this
# machine's Debian packages into one folder laid out as an install prefix, for a machine that has
# a compiler, CMake and CUDA but none of these packages and no network (the GPU machine). Point
# the build at it with -DTESSERA_DEPS_DIR=<folder> (tools/gpu-check.sh does).
#
#   tools/prepare-gpu-deps.sh [folder]     (default: build/gpu-deps, git-ignored)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-${repo_root}/build/gpu-deps}"

eigen_include=/usr/include/eigen3
eigen_cmake=/usr/share/eigen3/cmake
fmt_include=/usr/include/fmt
catch2_include=/usr/include/catch2
catch2_cmake=/usr/lib/cmake/Catch2
dlpack_include=/usr/include/dlpack
json_include=/usr/include/nlohmann
json_cmake=/usr/share/cmake/nlohmann_json
xxhash_header=/usr/include/xxhash.h
cli11_include=/usr/include/CLI
cli11_cmake=/usr/share/cmake/CLI11

for path in "${eigen_include}/Eigen" "${eigen_cmake}/Eigen3Config.cmake" \
  "${fmt_include}/format-inl.h" "${catch2_include}/catch.hpp" "${catch2_cmake}/Catch.cmake" \
  "${catch2_cmake}/CatchAddTests.cmake" "${catch2_cmake}/Catch2ConfigVersion.cmake" \
  "${dlpack_include}/dlpack.h" "${json_include}/json.hpp" "${json_cmake}/nlohmann_jsonConfig.cmake" "${xxhash_header}" \
  "${cli11_include}/CLI.hpp" "${cli11_cmake}/CLI11Config.cmake" "${cli11_cmake}/CLI11ConfigVersion.cmake"; do
  if [[ ! -e "${path}" ]]; then
    echo "prepare-gpu-deps: ${path} is missing; run tools/install-deps.sh first" >&2
    exit 1
  fi
done

# Replaces an earlier copy, never a folder this script did not make.
if [[ -d "${dest}" && -n "$(ls -A "${dest}")" && ! -f "${dest}/README.md" ]]; then
  echo "prepare-gpu-deps: ${dest} exists and was not made by this script; choose another folder" >&2
  exit 1
fi
rm -rf "${dest}"
mkdir -p "${dest}/include" "${dest}/share/eigen3" "${dest}/lib/cmake/Catch2"

# Eigen: headers (Eigen/ and unsupported/, used by kernels/cpu/elementwise.cpp) and its package
# files, which locate the headers relative to themselves (<prefix>/share/eigen3/cmake).
cp -r "${eigen_include}" "${dest}/include/eigen3"
cp -r "${eigen_cmake}" "${dest}/share/eigen3/cmake"

# fmt: headers only; cmake/TesseraDeps.cmake makes fmt::fmt with FMT_HEADER_ONLY=1 (Debian's
# package files would point at libfmt.so, which the other machine lacks).
cp -r "${fmt_include}" "${dest}/include/fmt"

# Catch2 2.x: the single header and the scripts behind catch_discover_tests. Debian's
# Catch2Config.cmake imports libCatch2WithMain.a as well (and fails if it is absent); the tests
# have their own main, so a smaller config defines Catch2::Catch2 alone.
cp -r "${catch2_include}" "${dest}/include/catch2"
cp "${catch2_cmake}/Catch.cmake" "${catch2_cmake}/CatchAddTests.cmake" \
  "${catch2_cmake}/Catch2ConfigVersion.cmake" "${dest}/lib/cmake/Catch2/"
cat >"${dest}/lib/cmake/Catch2/Catch2Config.cmake" <<'CMAKE'
# Catch2 2.x, header-only (written by tools/prepare-gpu-deps.sh).
get_filename_component(_catch2_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET Catch2::Catch2)
  add_library(Catch2::Catch2 INTERFACE IMPORTED)
  set_target_properties(Catch2::Catch2 PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_catch2_prefix}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_11)
endif()
# For include(Catch) and its catch_discover_tests.
list(APPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")
unset(_catch2_prefix)
CMAKE

# DLPack: one header. Debian's package files locate it from their multiarch folder, so a config
# of its own defines dlpack::dlpack relative to this folder.
cp -r "${dlpack_include}" "${dest}/include/dlpack"
mkdir -p "${dest}/lib/cmake/dlpack"
cat >"${dest}/lib/cmake/dlpack/dlpackConfig.cmake" <<'CMAKE'
# DLPack, header-only (written by tools/prepare-gpu-deps.sh).
get_filename_component(_dlpack_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET dlpack::dlpack)
  add_library(dlpack::dlpack INTERFACE IMPORTED)
  set_target_properties(dlpack::dlpack PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_dlpack_prefix}/include")
endif()
unset(_dlpack_prefix)
CMAKE

# nlohmann-json: headers and its package files, which locate them relative to themselves
# (<prefix>/share/cmake/nlohmann_json).
cp -r "${json_include}" "${dest}/include/nlohmann"
mkdir -p "${dest}/share/cmake"
cp -r "${json_cmake}" "${dest}/share/cmake/nlohmann_json"

# xxHash: one header, inlined by checkpoint/detail/checksum.cpp (XXH_INLINE_ALL).
cp "${xxhash_header}" "${dest}/include/xxhash.h"

# CLI11 (the tools' command lines): headers and its package files, which locate them relative to
# themselves (<prefix>/share/cmake/CLI11).
cp -r "${cli11_include}" "${dest}/include/CLI"
cp -r "${cli11_cmake}" "${dest}/share/cmake/CLI11"

# Their licenses travel with them.
for pkg in libeigen3-dev libfmt-dev catch2 libdlpack-dev nlohmann-json3-dev libxxhash-dev libcli11-dev; do
  if [[ -f "/usr/share/doc/${pkg}/copyright" ]]; then
    mkdir -p "${dest}/share/doc/${pkg}"
    cp "/usr/share/doc/${pkg}/copyright" "${dest}/share/doc/${pkg}/"
  fi
done

eigen_version=$(sed -n 's/^set (EIGEN3_VERSION_STRING *"\(.*\)")/\1/p' "${eigen_cmake}/Eigen3Config.cmake")
fmt_version=$(sed -n 's/^# *define FMT_VERSION \([0-9]*\).*/\1/p' "${fmt_include}/core.h")
json_version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' "${json_cmake}/nlohmann_jsonConfigVersion.cmake")
dlpack_version=$(sed -n 's/^#define DLPACK_VERSION \([0-9]*\).*/\1/p' "${dlpack_include}/dlpack.h")
catch2_version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' "${catch2_cmake}/Catch2ConfigVersion.cmake")
cli11_version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' "${cli11_cmake}/CLI11ConfigVersion.cmake")
cat >"${dest}/README.md" <<README
# Tessera's header-only dependencies

Made by \`tools/prepare-gpu-deps.sh\` on $(date -u +%Y-%m-%dT%H:%MZ) from Debian's packages, for a
build machine without them: configure Tessera with \`-DTESSERA_DEPS_DIR=<this folder>\` (see
tools/gpu-check.sh). Their Debian copyright files are in share/doc/.

| dependency | version | here | from |
|---|---|---|---|
| Eigen | ${eigen_version} | include/eigen3, share/eigen3/cmake | ${eigen_include}, ${eigen_cmake} |
| fmt | ${fmt_version} (FMT_VERSION) | include/fmt, used with FMT_HEADER_ONLY=1 | ${fmt_include} |
| Catch2 | ${catch2_version} | include/catch2, lib/cmake/Catch2 (Catch2Config.cmake written here) | ${catch2_include}, ${catch2_cmake} |
| DLPack | ${dlpack_version} (DLPACK_VERSION) | include/dlpack, lib/cmake/dlpack (dlpackConfig.cmake written here) | ${dlpack_include} |
| nlohmann-json | ${json_version} | include/nlohmann, share/cmake/nlohmann_json | ${json_include}, ${json_cmake} |
| CLI11 | ${cli11_version} | include/CLI, share/cmake/CLI11 | ${cli11_include}, ${cli11_cmake} |

Not here: oneDNN (TESSERA_ONEDNN=OFF: the CPU matmul uses Eigen) and MPI (TESSERA_MPI=OFF).
README

echo "prepare-gpu-deps: $(du -sh "${dest}" | cut -f1) in ${dest}"
