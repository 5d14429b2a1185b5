#!/usr/bin/env bash
# Installs (only) the Debian 12 packages Tessera builds against that are missing. Idempotent.
set -euo pipefail

packages=(build-essential cmake ninja-build git pkg-config ccache
          libeigen3-dev libdnnl-dev libopenmpi-dev openmpi-bin catch2 libfmt-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
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
