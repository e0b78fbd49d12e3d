#!/usr/bin/env bash
# Downloads NVRTC 12 (the PyPI wheel nvidia-cuda-nvrtc-cu12, which still compiles for sm_70;
# NVRTC 13 starts at sm_75) and unpacks its libraries into a folder, idempotently. Prints
# the path to put in SPINDLE_NVRTC_LIBRARY:
#
#   export SPINDLE_NVRTC_LIBRARY="$(scripts/install-nvrtc12.sh)"
#
# Usage: scripts/install-nvrtc12.sh [DEST]   (default DEST: <repo>/.deps/nvrtc12)
# Environment: NVRTC12_VERSION pins the wheel version (default: the newest 12.x); PIP is the
# pip command (default: python3 -m pip).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/.deps/nvrtc12}"
pip_cmd=(${PIP:-python3 -m pip})
spec="nvidia-cuda-nvrtc-cu12${NVRTC12_VERSION:+==$NVRTC12_VERSION}"

find_lib() { find "$dest/lib" -maxdepth 1 -name 'libnvrtc.so.12*' ! -name '*builtins*' ! -name '*alt*' 2>/dev/null | sort | head -n 1 || true; }

lib="$(find_lib)"
if [ -n "$lib" ] && [ -f "$dest/.complete" ]; then
  echo "$lib"
  exit 0
fi

mkdir -p "$dest"
work="$(mktemp -d "$dest/.download.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "spindle: downloading $spec" >&2
"${pip_cmd[@]}" download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
  --python-version 3.11 --implementation py --dest "$work" "$spec" >&2 ||
"${pip_cmd[@]}" download --quiet --no-deps --only-binary=:all: --dest "$work" "$spec" >&2
wheel="$(ls "$work"/nvidia_cuda_nvrtc_cu12-*.whl | head -n 1)"
python3 - "$wheel" "$work/unpacked" <<'EOF'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
EOF
src="$(find "$work/unpacked" -type d -path '*nvidia/cuda_nvrtc/lib' | head -n 1)"
[ -n "$src" ] || { echo "spindle: no nvidia/cuda_nvrtc/lib in $wheel" >&2; exit 1; }
rm -rf "$dest/lib"
mkdir -p "$dest/lib"
cp -a "$src"/. "$dest/lib/"
basename "$wheel" > "$dest/.complete"
lib="$(find_lib)"
[ -n "$lib" ] || { echo "spindle: the wheel $wheel holds no libnvrtc.so.12*" >&2; exit 1; }
echo "spindle: NVRTC 12 unpacked into $dest/lib" >&2
echo "$lib"
