#!/usr/bin/env bash
# GPU checks on a lent device machine without building there (device time is scarce):
#
#   scripts/gpu-carry.sh prepare     here: build a no-LLVM tree (build-gpu/: the device has
#                                    no LLVM 19; kernels' CPU references use the system C
#                                    compiler) and copy the binaries, the runtime library and
#                                    the shared GNN graphs into gpu-carry/ (git-ignored, ~18 MB)
#   scripts/gpu-carry.sh run         there, from the repository root, with gpu-carry carried:
#                                    the [cuda] tests on the GPU and spindle-kernel-fuzz on the
#                                    GPU engine side by side, then spindle-bench --backend cuda
#                                    (Spindle vs cuSPARSE) on the five GNN graphs, then the
#                                    SDDMM row-wise schedule (SPINDLE_CUDA_SDDMM=rows) and
#                                    the nonzero-parallel SpMM (SPINDLE_CUDA_SPMM=nonzeros)
#                                    for comparison on the same warm machine. Logs and
#                                    bench.json go to $OUT (or ./gpu-out).
# Environment for run: TEST_S, FUZZ_S (seconds, default 200 / 100), FUZZ_SEED (31), BENCH_S
# (200; 0 skips the benchmarks), ROWS_S (120; 0 skips the SDDMM comparison), NNZ_S (120; 0
# skips the SpMM comparison), NNZ_TEST_S (0: seconds for the "[cuda][spmm]" tests again under
# SPINDLE_CUDA_SPMM=nonzeros, after the others), TESTS (the Catch2 test filter, default "[cuda]"),
# BENCH_OPS (spmm,sddmm).
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${1:-}" in
  prepare)
    set -e
    cmake -S "$root" -B "$root/build-gpu" -DCMAKE_BUILD_TYPE=Release -DSPINDLE_WITH_LLVM=OFF -DSPINDLE_BENCH_WITH_MKL=OFF \
          -DSPINDLE_BENCH_WITH_GRAPHBLAS=OFF -DSPINDLE_BUILD_EXAMPLES=OFF
    cmake --build "$root/build-gpu" -j"$(nproc)" --target spindle-bench spindle_correctness_tests spindle-kernel-fuzz
    mkdir -p "$root/gpu-carry/bin" "$root/gpu-carry/data/gnn"
    cp "$root"/build-gpu/libspindle_runtime.so* "$root/build-gpu/benchmarks/spindle-bench" \
       "$root/build-gpu/tests/spindle_correctness_tests" "$root/build-gpu/tests/spindle-kernel-fuzz" "$root/gpu-carry/bin/"
    strip "$root"/gpu-carry/bin/spindle-* "$root/gpu-carry/bin/spindle_correctness_tests"
    cp "$root"/../shared/data/gnn/*.mtx.gz "$root/gpu-carry/data/gnn/"
    exclude="$(git -C "$root" rev-parse --git-dir)/info/exclude"
    grep -qx '/gpu-carry/' "$exclude" 2>/dev/null || echo '/gpu-carry/' >> "$exclude"
    du -sh "$root/gpu-carry" ;;
  run)
    G="$root/gpu-carry"; B="$G/bin"; D="$G/data/gnn"; out="${OUT:-$root/gpu-out}"; mkdir -p "$out"
    export LD_LIBRARY_PATH="$B:${LD_LIBRARY_PATH:-}" SPINDLE_TEST_DATA_DIR="$G/data" SPINDLE_CACHE_DIR=/tmp/spindle-kc
    mkdir -p /tmp/spindle-kc && chmod 700 /tmp/spindle-kc
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$out/machine.txt"
    ( timeout "${TEST_S:-200}" "$B/spindle_correctness_tests" "${TESTS:-[cuda]}" > "$out/cuda-tests.log" 2>&1
      echo "tests rc $?" >> "$out/cuda-tests.log" ) &
    ( timeout $(( ${FUZZ_S:-100} + 40 )) "$B/spindle-kernel-fuzz" --engines cuda --seed "${FUZZ_SEED:-31}" --count 0 \
        --seconds "${FUZZ_S:-100}" > "$out/fuzz.log" 2>&1; echo "fuzz rc $?" >> "$out/fuzz.log" ) &
    wait
    tail -n 3 "$out/cuda-tests.log"; tail -n 2 "$out/fuzz.log"
    if [ "${NNZ_TEST_S:-0}" != 0 ]; then
      SPINDLE_CUDA_SPMM=nonzeros timeout "$NNZ_TEST_S" "$B/spindle_correctness_tests" "[cuda][spmm]" \
          > "$out/cuda-tests-spmm-nnz.log" 2>&1
      echo "spmm nonzeros tests rc $?"; tail -n 3 "$out/cuda-tests-spmm-nnz.log"
    fi
    [ "${BENCH_S:-200}" = 0 ] && exit 0
    M="$D/cora.mtx.gz,$D/citeseer.mtx.gz,$D/pubmed.mtx.gz,$D/ppi-graphsaint.mtx.gz,$D/ogbn-arxiv.mtx.gz"
    timeout "${BENCH_S:-200}" "$B/spindle-bench" --backend cuda --op "${BENCH_OPS:-spmm,sddmm}" --matrix "$M" --feat 32,128,512 \
        --json-file "$out/bench.json" > "$out/bench.log" 2>&1
    echo "bench rc $?"; grep '|' "$out/bench.log" | cut -c1-120
    if [ "${ROWS_S:-120}" != 0 ]; then
      SPINDLE_CUDA_SDDMM=rows timeout "${ROWS_S:-120}" "$B/spindle-bench" --backend cuda --op sddmm --matrix "$M" \
          --feat 32,128,512 > "$out/bench-rows.log" 2>&1
      echo "rows rc $?"; grep '|' "$out/bench-rows.log" | cut -c1-100
    fi
    if [ "${NNZ_S:-120}" != 0 ]; then
      SPINDLE_CUDA_SPMM=nonzeros timeout "${NNZ_S:-120}" "$B/spindle-bench" --backend cuda --op spmm --matrix "$M" \
          --feat 32,128,512 > "$out/bench-spmm-nnz.log" 2>&1
      echo "spmm nonzeros rc $?"; grep '|' "$out/bench-spmm-nnz.log" | cut -c1-100
    fi ;;
  *) echo "usage: scripts/gpu-carry.sh prepare|run" >&2; exit 2 ;;
esac
