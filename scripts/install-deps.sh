#!/usr/bin/env bash
# Installs the Debian 12 packages Spindle needs that are not installed yet.
set -euo pipefail
packages=(cmake make ninja-build g++ ccache zlib1g-dev llvm-19-dev libclang-19-dev libclang-cpp19-dev libxgboost0
          libeigen3-dev catch2 libgraphblas-dev clang-19 libclang-rt-19-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "spindle: all dependencies are installed"
  exit 0
fi
echo "spindle: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
