#!/usr/bin/env bash
# The main job: install what is missing, build, and run spindle-bench on the bundled graph
# (data/cora.mtx.gz): Spindle vs Eigen (and GraphBLAS) for SpMM. Extra arguments go to
# spindle-bench (e.g. --op spmm,spmv,sddmm --feat 32,128,512 --threads 1,2).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
build="${SPINDLE_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPINDLE_BUILD_TESTS=OFF -DSPINDLE_BUILD_EXAMPLES=OFF
cmake --build "$build" -j"$(nproc)" --target spindle-bench
"$build/benchmarks/spindle-bench" "$@"
