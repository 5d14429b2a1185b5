#!/usr/bin/env bash
# Installs (only) the Debian 12 (bookworm) packages Tessera builds against that are missing, and
# prints each package with what it is for. Idempotent.
set -euo pipefail

# package: why. ocl-icd-opencl-dev is only *recommended* by libdnnl-dev, but Debian's oneDNN CMake
# package (dnnl-config.cmake) requires OpenCL, so it is listed explicitly (--no-install-recommends).
packages=(
  "build-essential:g++ 12, make"
  "cmake:configure (3.25)"
  "ninja-build:the presets' generator"
  "git:sources"
  "pkg-config:library lookup"
  "ccache:rebuild cache"
  "libeigen3-dev:Eigen 3.4, CPU kernels"
  "libdnnl-dev:oneDNN 2.6, CPU matmul"
  "ocl-icd-opencl-dev:OpenCL, which oneDNN's CMake package requires"
  "libopenblas-dev:OpenBLAS 0.3, a CPU float32 GEMM backend (optional: builds without it)"
  "libopenmpi-dev:MPI collectives backend"
  "openmpi-bin:mpirun, for the MPI tests"
  "catch2:Catch2 2.13, tests"
  "libfmt-dev:fmt 9, formatting"
  "libdlpack-dev:DLPack header, to_dlpack / from_dlpack"
  "nlohmann-json3-dev:JSON: checkpoint metadata, the tools' output (tessera-shardbench --json)"
  "libxxhash-dev:XXH3 checksums of checkpoint chunks (header-only use)"
  "libcli11-dev:CLI11 2.1, the tools' command lines (header-only)"
)

missing=()
echo "install-deps: Debian 12 packages Tessera needs:"
for entry in "${packages[@]}"; do
  p=${entry%%:*}
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    state="present"
  else
    state="to install"
    missing+=("$p")
  fi
  printf '  %-20s %-11s %s\n' "$p" "$state" "${entry#*:}"
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
