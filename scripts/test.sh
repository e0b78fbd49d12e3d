#!/usr/bin/env bash
# Install what is missing, build everything, and run the whole test suite; then build and
# run the same suite under AddressSanitizer + UndefinedBehaviorSanitizer.
#   scripts/test.sh               both builds
#   scripts/test.sh --no-sanitize plain build only
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sanitize=1
for arg in "$@"; do
  case "$arg" in
    --no-sanitize) sanitize=0 ;;
    *) echo "usage: scripts/test.sh [--no-sanitize]" >&2; exit 2 ;;
  esac
done
"$root/scripts/install-deps.sh"
jobs="$(nproc)"

run_suite() {  # build dir, extra cmake args...
  local build="$1"; shift
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$build" -j"$jobs"
  # Each run starts from an empty kernel cache so the suite exercises cold compiles too.
  rm -rf "$build/tests/kernel-cache-"*
  ctest --test-dir "$build" -j"$jobs" --output-on-failure --timeout 1500
}

run_suite "${SPINDLE_BUILD_DIR:-$root/build}"
if ((sanitize)); then
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  run_suite "${SPINDLE_ASAN_BUILD_DIR:-$root/build-asan}" -DSPINDLE_SANITIZE=ON -DSPINDLE_BUILD_BENCHMARKS=OFF
fi
echo "spindle: all tests passed"
