#!/usr/bin/env bash
# Installs the optional peers of spindle-bench that do not come from Debian: Intel MKL
# (inspector-executor sparse BLAS; PyPI wheels `mkl`, `mkl-include`, `intel-openmp`) into a
# local virtual environment, .peers/venv, where benchmarks/CMakeLists.txt finds it. Re-run
# CMake afterwards (cmake -S . -B build) so that spindle-bench links it.
# With --pyg it also installs PyTorch and PyTorch Geometric (PyPI `torch`, `torch_geometric`)
# into the same venv, for benchmarks/peers/pyg_layers.py (PyG GNN-layer timings and reference
# outputs; run it with .peers/venv/bin/python). torch's PyPI wheel pulls in the CUDA libraries,
# a few GB on disk, although spindle only runs it on the CPU.
# Usage: scripts/install-peers.sh            (MKL; idempotent; ~600 MB on disk)
#        scripts/install-peers.sh --pyg      (MKL, then torch + torch_geometric; idempotent:
#                                             skipped when both import in the venv; a few GB)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.peers/venv"
pyg=0
for arg in "$@"; do
  case "$arg" in
    --pyg) pyg=1 ;;
    *) echo "usage: $0 [--pyg]" >&2; exit 64 ;;
  esac
done
install_pyg() {
  if "$venv/bin/python" -c 'import torch, torch_geometric' >/dev/null 2>&1; then
    echo "spindle: torch and torch_geometric are installed in $venv"
    return
  fi
  "$venv/bin/pip" install -q --disable-pip-version-check 'torch>=2.4' 'torch_geometric>=2.6'
  echo "spindle: torch and torch_geometric installed in $venv; spindle-gnn-bench --pyg uses them" \
    "(benchmarks/peers/pyg_layers.py)"
}
if [ -e "$venv/include/mkl_spblas.h" ] && ls "$venv"/lib/libmkl_rt.so* >/dev/null 2>&1; then
  echo "spindle: MKL is installed in $venv"
  if [ "$pyg" -eq 1 ]; then install_pyg; fi
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
if [ "$pyg" -eq 1 ]; then install_pyg; fi
