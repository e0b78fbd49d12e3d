#!/usr/bin/env bash
# The weight of spindle.hpp for a user: one translation unit that includes it, reads a Matrix
# Market file and defines SpMM (tests/package/consumer/main.cpp), compiled as a consumer of the
# CMake target compiles it (with the separate-compilation switch).
#   1. No LLVM, Clang, CUDA or NVRTC header is behind it (deterministic: the dependency list).
#   2. Its compile takes at most BUDGET seconds of compiler CPU time (user + sys), the best of
#      up to three tries: CPU time, not wall time, so a loaded or shared machine does not fail
#      it (CTest runs it alone, yet one CI rehearsal measured 10.0 s wall for a 4.5 s compile).
# usage: check_compile_time.sh CXX INCLUDE_DIR SOURCE BUDGET_SECONDS
set -euo pipefail
cxx="$1" inc="$2" src="$3" budget="$4"
# A compiler reached through ccache's masquerade directory (/usr/lib/ccache/c++ on PATH when
# the build was configured) would also be timed preprocessing for ccache and hashing: 10 s
# instead of 5 s for the same compile. Time the compiler alone.
export CCACHE_DISABLE=1
flags=(-std=c++20 -O2 -DSPINDLE_SEPARATE_COMPILATION=1 "-I$inc")
err="$(mktemp)"
trap 'rm -f "$err"' EXIT

deps="$("$cxx" "${flags[@]}" -M "$src" 2>"$err")" || { cat "$err"; echo "listing the headers of $src failed"; exit 1; }
heavy="$(tr ' \\' '\n\n' <<<"$deps" | grep -E '/(llvm|clang|llvm-c|clang-c)/|/(cuda|cuda_runtime|nvrtc)[^/]*\.h$' || true)"
if [[ -n "$heavy" ]]; then
  echo "spindle.hpp pulls in headers a user TU must not pay for:"
  echo "$heavy"
  exit 1
fi

best=""
for try in 1 2 3; do
  TIMEFORMAT='%3U %3S'
  times="$( { time "$cxx" "${flags[@]}" -c "$src" -o /dev/null 2>"$err"; } 2>&1 )" ||
    { cat "$err"; echo "compiling $src failed"; exit 1; }
  millis="$(awk '{ printf "%d", ($1 + $2) * 1000 }' <<<"$times")"
  echo "try $try: user TU with spindle.hpp + SpMM compiled in $millis ms of CPU time (budget $budget s)"
  if [[ -z "$best" || "$millis" -lt "$best" ]]; then best="$millis"; fi
  if ((best <= budget * 1000)); then exit 0; fi
done
echo "compile time $best ms of CPU time exceeds the budget of $budget s"
exit 1
