#!/usr/bin/env bash
# The main job: install what is missing, build, and run spindle-bench on the bundled graph
# (data/cora.mtx.gz): Spindle vs Eigen, GraphBLAS and Intel MKL for SpMM. Extra arguments go
# to spindle-bench (e.g. --op spmm,spmv,sddmm --feat 32,128,512 --threads 1,2).
# MKL comes from PyPI (scripts/install-peers.sh, into .peers/venv); SPINDLE_NO_MKL=1 skips it,
# and the benchmark runs without MKL when that install fails (no network).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
if [ "${SPINDLE_NO_MKL:-0}" != 1 ]; then
  "$root/scripts/install-peers.sh" || echo "spindle: MKL could not be installed; spindle-bench runs without it"
fi
build="${SPINDLE_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPINDLE_BUILD_TESTS=OFF -DSPINDLE_BUILD_EXAMPLES=OFF
cmake --build "$build" -j"$(nproc)" --target spindle-bench
"$build/benchmarks/spindle-bench" "$@"
