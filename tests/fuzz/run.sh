#!/usr/bin/env bash
# Builds and runs the libFuzzer targets of tests/fuzz (fuzz_*.cpp) with clang++-19, without
# CMake (the CMake route is -DSPINDLE_BUILD_FUZZERS=ON, see tests/fuzz/CMakeLists.txt).
#
#   tests/fuzz/run.sh build [TARGET...]          build all targets (or the named ones)
#   tests/fuzz/run.sh smoke [TARGET...]          run each target once over its seed corpus
#   tests/fuzz/run.sh fuzz TARGET SECONDS [ARGS] fuzz TARGET for SECONDS (extra libFuzzer ARGS)
#
# Environment: SPINDLE_FUZZ_DIR (default <repo>/build-fuzz) holds the binaries, the growing
# working corpora (corpus/<target>/, seeded from tests/fuzz/corpus/<target>/, which stays
# untouched), crash artifacts (artifacts/<target>/) and logs (<target>.log);
# CXX (default clang++-19). Fuzzing uses -max_len=4096 -rss_limit_mb=2048 and runs niced.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${SPINDLE_FUZZ_DIR:-$repo/build-fuzz}"
cxx="${CXX:-clang++-19}"
flags=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -g -O1 -std=c++20
       -Wall -Wno-deprecated-declarations -I"$repo/include" -I"$here")

all_targets() { for f in "$here"/fuzz_*.cpp; do basename "$f" .cpp; done; }

build() {
  mkdir -p "$out"
  local t
  for t in "$@"; do
    echo "build $t"
    "$cxx" "${flags[@]}" "$here/$t.cpp" -o "$out/$t" -lz -lpthread -ldl
  done
}

cmd="${1:-}"
shift || true
case "$cmd" in
  build)
    if [ $# -eq 0 ]; then set -- $(all_targets); fi
    build "$@"
    ;;
  smoke)
    if [ $# -eq 0 ]; then set -- $(all_targets); fi
    for t in "$@"; do
      [ -x "$out/$t" ] || build "$t"
      echo "smoke $t"
      "$out/$t" -runs=0 "$here/corpus/$t"
    done
    ;;
  fuzz)
    t="${1:?target}"
    secs="${2:?seconds}"
    shift 2
    [ -x "$out/$t" ] || build "$t"
    mkdir -p "$out/corpus/$t" "$out/artifacts/$t"
    nice -n 10 "$out/$t" "$out/corpus/$t" "$here/corpus/$t" -max_len=4096 -rss_limit_mb=2048 \
      -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$out/artifacts/$t/" "$@" \
      2>&1 | tee "$out/$t.log"
    ;;
  *)
    sed -n '2,14p' "$0"
    exit 2
    ;;
esac
