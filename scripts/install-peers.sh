#!/usr/bin/env bash
# Installs the optional peers of spindle-bench that do not come from Debian: Intel MKL
# (inspector-executor sparse BLAS; PyPI wheels `mkl`, `mkl-include`, `intel-openmp`) into a
# local virtual environment, .peers/venv, where benchmarks/CMakeLists.txt finds it. Re-run
# CMake afterwards (cmake -S . -B build) so that spindle-bench links it.
# Usage: scripts/install-peers.sh            (idempotent; ~600 MB on disk)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.peers/venv"
if [ -e "$venv/include/mkl_spblas.h" ] && ls "$venv"/lib/libmkl_rt.so* >/dev/null 2>&1; then
  echo "spindle: MKL is installed in $venv"
  exit 0
fi
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv
fi
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check 'mkl==2025.*' 'mkl-include==2025.*' 'intel-openmp<2027'
echo "spindle: MKL installed in $venv; re-run cmake so that spindle-bench measures it"
