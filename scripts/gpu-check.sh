#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, as one script for a machine that has one (CI has none:
# there these paths run in the CUDA emulator and NVRTC compiles every module to a cubin).
#
#   scripts/gpu-check.sh BUILD_DIR OUT_DIR
#
# BUILD_DIR is a configured and built tree (spindle_*_tests, spindle-kernel-fuzz,
# spindle-bench); OUT_DIR gets one log per step. Steps, each under its own time limit:
#   1. the test suite through CTest (every [cuda] test and the CUDA paths of the others run
#      on the GPU: arguments mirrored into device memory, outputs copied back), in parallel
#      with
#   2. spindle-kernel-fuzz on the "cuda" engine, which runs each random kernel on the GPU and
#      compares it with the reference interpreter;
#   3. with FRONTEND_S set, spindle-frontend-fuzz beside it: kernels written through the C++
#      front end, compiled in batches, on the system engine and the GPU;
#   4. spindle-bench --backend cuda: Spindle vs cuSPARSE on the shared graphs (BENCH_S=0
#      skips it).
# Environment: JOBS (CTest processes, 12), SUITE_S / FUZZ_S / FRONTEND_S / BENCH_S (seconds
# per step), FUZZ_SEED, FUZZ_COUNT (kernels; 0: until FUZZ_S), FRONTEND_SEED, FRONTEND_JOBS, BENCH_MATRICES (comma list for
# --matrix), BENCH_FEAT.
set -u
build=$(cd "${1:?usage: gpu-check.sh BUILD_DIR OUT_DIR}" && pwd)
out=${2:?usage: gpu-check.sh BUILD_DIR OUT_DIR}
mkdir -p "$out"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  echo "cc: $(cc --version 2>&1 | head -1)"
  nproc
} > "$out/machine.txt"
cat "$out/machine.txt"

if ! command -v ctest > /dev/null; then  # no CTest: the four suites, one process each
  ( for t in unit correctness error golden; do
      timeout "${SUITE_S:-240}" "$build/tests/spindle_${t}_tests" > "$out/suite-$t.log" 2>&1 &
    done; wait ) &
else
( cd "$build" && timeout "${SUITE_S:-240}" ctest -j"${JOBS:-12}" --timeout 220 \
    -E 'frontend|example\.|package|compile_fail|bench\.|random_kernels' > "$out/ctest.log" 2>&1
  echo "ctest exit status $?" >> "$out/ctest.log" ) &
fi
wait $!
tail -n 25 "$out"/ctest.log "$out"/suite-*.log 2>/dev/null
if [ -n "${FRONTEND_S:-}" ]; then
  timeout $(( FRONTEND_S + 240 )) "$build/tests/spindle-frontend-fuzz" --seed "${FRONTEND_SEED:-41}" --count 0 \
      --seconds "$FRONTEND_S" --batch 30 --jobs "${FRONTEND_JOBS:-8}" --engines system,cuda --no-shrink \
      --work "${TMPDIR:-/tmp}/spindle-gpu-frontend" > "$out/frontend.log" 2>&1 &
  frontend=$!
fi
timeout $(( ${FUZZ_S:-200} + 60 )) stdbuf -oL "$build/tests/spindle-kernel-fuzz" --engines cuda --seed "${FUZZ_SEED:-31}" \
    --count "${FUZZ_COUNT:-0}" --seconds "${FUZZ_S:-200}" > "$out/fuzz.log" 2>&1
echo "fuzz exit status $?" >> "$out/fuzz.log"
if [ -n "${frontend:-}" ]; then
  wait $frontend
  echo "frontend fuzz exit status $?" >> "$out/frontend.log"
  grep -E "^FAIL|failures|exit status" "$out/frontend.log" | tail -n 12
fi
grep -E "^FAIL|spindle-kernel-fuzz:|exit status" "$out/fuzz.log" | head -20
tail -n 3 "$out/fuzz.log"

[ "${BENCH_S:-150}" = 0 ] && exit 0
timeout "${BENCH_S:-150}" "$build/benchmarks/spindle-bench" --backend cuda \
    --matrix "${BENCH_MATRICES:-gnn/cora,gnn/citeseer,gnn/pubmed,gnn/ppi-graphsaint,gnn/ogbn-arxiv}" \
    --feat "${BENCH_FEAT:-32,128,512}" --json-file "$out/bench.json" > "$out/bench.log" 2>&1
echo "bench exit status $?" >> "$out/bench.log"
tail -n 60 "$out/bench.log"
