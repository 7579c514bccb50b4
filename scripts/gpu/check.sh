#!/usr/bin/env bash
# The one script for the GPU machine: build (all cores, sm_90a only), run the cuda-labelled
# tests, run the kernel/model micro-benchmark; full logs go to $OUT, a short table is printed
# last. Steps are arguments, in any combination:
#   bash scripts/gpu/check.sh build test bench
# Environment:
#   TARGETS="a b"   build only these targets (default: everything)
#   CTEST_LABEL=x   ctest label to run in `test` (default: cuda)
#   BUILD_DIR=dir   build directory (default: build-gpu)
#   CUDA_ONLY=1     build scripts/gpu/cuda_only (core, ops, CUDA backend, its tests) instead of
#                   the whole tree; also the automatic fallback when the whole tree fails to configure
# Missing Debian packages (PCRE2, utf8proc, prometheus-cpp) travel as .deb files in
# .devcarry/debs (carry: [".devcarry"]) and are unpacked into /tmp/prefix; scripts/gpu/fetch_debs.sh
# fetches them into a fresh checkout.
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
PREFIX=/tmp/prefix
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

unpack_debs() {
  [ -d .devcarry/debs ] || { echo "no .devcarry/debs: assuming the system has every dependency"; return 0; }
  mkdir -p "$PREFIX"
  for f in .devcarry/debs/*.deb; do dpkg -x "$f" "$PREFIX"; done
  local libdir="$PREFIX/usr/lib/x86_64-linux-gnu"
  # The .pc files name /usr as their prefix; point them at the unpacked tree.
  sed -i "s|^prefix=/usr\$|prefix=$PREFIX/usr|" "$libdir"/pkgconfig/*.pc 2>/dev/null || true
  # prometheus-cpp's config wants civetweb and CURL for pull/push, which we do not use.
  local pc="$libdir/cmake/prometheus-cpp/prometheus-cpp-config.cmake"
  [ -f "$pc" ] && sed -i 's/PROMETHEUS_CPP_ENABLE_PULL ON/PROMETHEUS_CPP_ENABLE_PULL OFF/; s/PROMETHEUS_CPP_ENABLE_PUSH ON/PROMETHEUS_CPP_ENABLE_PUSH OFF/; s/PROMETHEUS_CPP_USE_COMPRESSION ON/PROMETHEUS_CPP_USE_COMPRESSION OFF/' "$pc"
  export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

configure() {  # $1: source dir
  # A cache left by the other source tree (the cuda_only fallback of an earlier call) would refuse.
  local home; home=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null)
  [ -z "$home" ] || [ "$home" = "$(cd "$1" && pwd)" ] || rm -rf "$BUILD_DIR"
  cmake -S "$1" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFRUGAL_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH="$PREFIX/usr" >>"$OUT/build.log" 2>&1
}

step_build() {
  local t0=$SECONDS
  : >"$OUT/build.log"
  if [ "${CUDA_ONLY:-0}" = 1 ] || ! configure .; then
    [ "${CUDA_ONLY:-0}" = 1 ] || { grep -A5 "CMake Error" "$OUT/build.log" | head -20; note "build: whole tree did not configure; building scripts/gpu/cuda_only"; }
    rm -rf "$BUILD_DIR"
    TARGETS=""
    configure scripts/gpu/cuda_only || { tail -40 "$OUT/build.log"; note "build: configure FAILED"; return 1; }
  fi
  local targets=()
  for t in ${TARGETS:-}; do targets+=(--target "$t"); done
  if ! cmake --build "$BUILD_DIR" -j "$(nproc)" "${targets[@]}" >>"$OUT/build.log" 2>&1; then
    grep -E "error|FAILED" "$OUT/build.log" | head -40
    note "build: FAILED ($((SECONDS - t0)) s), see build.log"
    return 1
  fi
  note "build: ok ($((SECONDS - t0)) s, ${TARGETS:-all targets})"
}

step_test() {
  local t0=$SECONDS label="${CTEST_LABEL:-cuda}"
  (cd "$BUILD_DIR" && ctest -L "$label" --output-on-failure -j 8 --timeout 600) >"$OUT/test.log" 2>&1
  local rc=$?
  grep -E "tests passed|tests failed|\*\*\*Failed|\(Failed\)|Timeout" "$OUT/test.log" | head -30 | tee -a "$SUMMARY"
  note "test ($label): $([ $rc -eq 0 ] && echo ok || echo FAILED) ($((SECONDS - t0)) s)"
  return $rc
}

step_bench() {
  local bin="$BUILD_DIR/tests/cuda/cuda_kernel_bench"
  [ -x "$bin" ] || { note "bench: $bin not built"; return 1; }
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv >"$OUT/bench.log" 2>&1 || true
  "$bin" ${BENCH_ARGS:-} >>"$OUT/bench.log" 2>&1
  local rc=$?
  sed -n '/=== cuda_kernel_bench summary/,$p' "$OUT/bench.log" >>"$SUMMARY"
  grep -E "^7B decode:" "$OUT/bench.log" >>"$SUMMARY"
  [ $rc -eq 0 ] || note "bench: FAILED (rc $rc), see bench.log"
  return $rc
}

[ $# -gt 0 ] || set -- build test bench
unpack_debs
status=0
for step in "$@"; do
  case "$step" in
    build) step_build || { status=1; break; } ;;
    test) step_test || status=1 ;;
    bench) step_bench || status=1 ;;
    *) echo "unknown step '$step' (build, test, bench)"; exit 2 ;;
  esac
done
echo
echo "===== summary ====="
cat "$SUMMARY"
exit $status
