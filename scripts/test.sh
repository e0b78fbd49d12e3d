#!/usr/bin/env bash
# Install what is missing, build everything, and run the whole test suite in four stages:
#   1. g++ (Release): the whole suite, including the fixed-seed batches of random IR kernels
#      (differential.random_kernels) and of random C++ kernels written through the public
#      API and compiled against the installed package (differential.frontend_kernels),
#      compared with the reference interpreter on every engine, 1 and 3 threads;
#   2. Clang 19 with AddressSanitizer + UndefinedBehaviorSanitizer (the runtime library
#      instrumented too): the whole suite again, with smaller fuzz batches, without the
#      examples and the compile-only checks (compile_fail.*, package: stage 1 runs them);
#      the Catch2 test sources compile at -O0 here, the library and the fuzz tools at -O3
#      (Clang with the instrumentation takes ~4x longer per test file at -O3: the stage's
#      build took ~1300 s that way, ~300 s now);
#   3. g++ with ThreadSanitizer (runtime library instrumented): the runtime tests (thread
#      pool, kernel cache, engines), built as their own small executable, and a batch of
#      random kernels whose generated code the ORC engine instruments too (races in
#      parallel loops reported by happens-before analysis, not by luck);
#   4. without LLVM (kernels compiled by the system C compiler + dlopen): the runtime and
#      error tests and a batch of random kernels (the correctness and unit tests run the
#      system engine in stage 1 already); then the libFuzzer targets once over their seed
#      corpora.
#   scripts/test.sh           all four
#   scripts/test.sh --quick   the g++ build only
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
full=1
for arg in "$@"; do
  case "$arg" in
    --quick) full=0 ;;
    *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
  esac
done
"$root/scripts/install-deps.sh"
jobs="$(nproc)"
# NVRTC 13 no longer targets sm_70; the CUDA compile checks use NVRTC 12 (a PyPI wheel,
# unpacked into .deps/) for that architecture.
if nvrtc12="$("$root/scripts/install-nvrtc12.sh")"; then
  export SPINDLE_TEST_NVRTC12="$nvrtc12"
else
  echo "spindle: WARNING: NVRTC 12 could not be installed; sm_70 compile checks are skipped" >&2
fi

# Each stage's wall time, printed as it ends: CI keeps the whole under an hour, and the fuzz
# batches (SPINDLE_FUZZ_BATCH and friends, the counts below) are sized by these figures;
# long campaigns run outside CI (README.md, "What a kernel means").
stage_start=$SECONDS
stage_done() {
  echo "spindle: stage '$1' took $((SECONDS - stage_start)) s (total $SECONDS s)"
  stage_start=$SECONDS
}

# Ninja for new build folders: it compiles the tests' objects while the runtime library
# still compiles (Make waits for each target's dependencies), so both cores stay busy. A
# folder configured before keeps its generator.
configure() {  # build dir, cmake args...
  local build="$1"; shift
  local generator=()
  if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
  cmake -S "$root" -B "$build" "${generator[@]}" "$@"
}

run_suite() {  # build dir, extra cmake args...
  local build="$1"; shift
  configure "$build" -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$build" -j"$jobs"
  stage_done "build $(basename "$build")"
  # Each run starts from an empty kernel cache so the suite exercises cold compiles too.
  rm -rf "$build/tests/kernel-cache-"*
  ctest --test-dir "$build" -j"$jobs" --output-on-failure --timeout 1500
  stage_done "ctest $(basename "$build")"
}

run_suite "${SPINDLE_BUILD_DIR:-$root/build}"
if ((full)); then
  (
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    # NVRTC 12 fails its builtin operations inside an ASan process (NVRTC_ERROR_BUILTIN_
    # OPERATION_FAILURE); the sm_70 compile checks run in the plain stage only.
    unset SPINDLE_TEST_NVRTC12
    # Half the random einsum cases of the plain stage (each compiles its kernels under ASan).
    export SPINDLE_EINSUM_CASES=30
    CC=clang-19 CXX=clang++-19 run_suite "${SPINDLE_ASAN_BUILD_DIR:-$root/build-clang-asan}" \
      -DSPINDLE_SANITIZE=ON -DSPINDLE_BUILD_BENCHMARKS=OFF -DSPINDLE_BUILD_EXAMPLES=OFF \
      -DSPINDLE_COMPILE_CHECKS=OFF -DSPINDLE_TEST_OPTIMIZATION=-O0 -DSPINDLE_FUZZ_BATCH=40 \
      -DSPINDLE_FRONTEND_FUZZ_BATCH=12 -DSPINDLE_FUZZ_LARGE_EVERY=5
  )
  stage_start=$SECONDS  # the subshell printed its stages
  # ThreadSanitizer over the thread pool, the kernel cache (threads and processes) and engines.
  tsan="${SPINDLE_TSAN_BUILD_DIR:-$root/build-tsan}"
  configure "$tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPINDLE_TSAN=ON \
        -DSPINDLE_BUILD_BENCHMARKS=OFF -DSPINDLE_BUILD_EXAMPLES=OFF
  cmake --build "$tsan" -j"$jobs" --target spindle_runtime_tests spindle-kernel-fuzz
  rm -rf "$tsan/kernel-cache"
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" SPINDLE_CACHE_DIR="$tsan/kernel-cache" \
    "$tsan/tests/spindle_runtime_tests" "[runtime]"
  # Random kernels with their parallel loops instrumented too (the ORC engine compiles them
  # with -fsanitize=thread in this build): a race in generated code is reported whatever the
  # timing, where comparing values catches it only in some runs. Every fourth kernel also on
  # large inputs (CI time: 40 kernels with every second one large made this stage 525 s of a
  # 72-minute run on a 2-core machine; longer campaigns: spindle-kernel-fuzz --seconds N).
  TSAN_OPTIONS="halt_on_error=1" SPINDLE_CACHE_DIR="$tsan/kernel-cache" \
    "$tsan/tests/spindle-kernel-fuzz" --seed 4 --count 32 --large-every 4 --engines orc
  stage_done "ThreadSanitizer"
  # Without LLVM: the system-compiler engine.
  nollvm="${SPINDLE_NOLLVM_BUILD_DIR:-$root/build-nollvm}"
  configure "$nollvm" -DCMAKE_BUILD_TYPE=Release -DSPINDLE_WITH_LLVM=OFF \
        -DSPINDLE_BUILD_BENCHMARKS=OFF -DSPINDLE_BUILD_EXAMPLES=OFF
  cmake --build "$nollvm" -j"$jobs" --target spindle_runtime_tests spindle_error_tests spindle-kernel-fuzz
  rm -rf "$nollvm/kernel-cache"
  for t in spindle_runtime_tests spindle_error_tests; do
    SPINDLE_CACHE_DIR="$nollvm/kernel-cache" "$nollvm/tests/$t"
  done
  SPINDLE_CACHE_DIR="$nollvm/kernel-cache" "$nollvm/tests/spindle-kernel-fuzz" --seed 2 --count 50 --engines system
  stage_done "without LLVM"
  # libFuzzer targets (Matrix Market reader, CSR validator, cache-entry reader): built with
  # Clang's fuzzer + ASan + UBSan and run once over their committed seed corpora. Long runs:
  # tests/fuzz/run.sh fuzz TARGET SECONDS.
  SPINDLE_FUZZ_DIR="$root/build-fuzz" bash "$root/tests/fuzz/run.sh" build
  SPINDLE_FUZZ_DIR="$root/build-fuzz" bash "$root/tests/fuzz/run.sh" smoke
  stage_done "libFuzzer"
fi
echo "spindle: all tests passed"
