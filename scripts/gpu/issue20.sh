#!/usr/bin/env bash
# Issue 20 on the GPU machine in one call (docs/perf/2026-12-02-kv-precision.md): build the CLI
# and the CUDA tests; the op harness (fp8/int8 KV, sinks) and CudaOps; the 32k long-context
# runs per KV dtype; the 1024/1024 throughput per KV dtype; the engine batch invariance per KV
# variant; decode at 32k with FRUGAL_DECODE_PIPELINE=0 (the A/B). Every result line goes to
# stdout and $OUT/issue20.txt as it comes, so a call cut short still returns what ran.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/frugal-out}"; mkdir -p "$OUT"
T0=$SECONDS
say() { echo "[$((SECONDS - T0)) s] $*" | tee -a "$OUT/issue20.txt"; }
show() { tee -a "$OUT/issue20.txt"; }
TARGETS="frugal cuda_harness_test cuda_ops_test cuda_engine_test" bash scripts/gpu/check.sh build >/dev/null 2>&1
rc=$?; say "build rc=$rc"; [ $rc -eq 0 ] || { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
B=build-gpu
timeout 60 "$B/tests/cuda/cuda_harness_test" >"$OUT/harness.log" 2>&1; say "cuda_harness_test rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|case:" "$OUT/harness.log" | head -12 | show
timeout 60 "$B/tests/cuda/cuda_ops_test" >"$OUT/ops.log" 2>&1; say "cuda_ops_test rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/ops.log" | head -8 | show
timeout 90 bash scripts/gpu/accept.sh long32k >/dev/null 2>&1; say "long32k rc=$?"
show <"$OUT/accept_summary.txt"
timeout 60 bash scripts/gpu/accept.sh kvtput >/dev/null 2>&1; say "kvtput rc=$?"
show <"$OUT/accept_summary.txt"
timeout 90 "$B/tests/cuda_engine/cuda_engine_test" --gtest_filter='*stories260K*:*Kv*' >"$OUT/engine.log" 2>&1
say "cuda_engine_test rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|OK \]" "$OUT/engine.log" | head -12 | show
KV_DTYPES=bf16 FRUGAL_DECODE_PIPELINE=0 timeout 40 bash scripts/gpu/accept.sh long32k >/dev/null 2>&1
say "long32k bf16 with FRUGAL_DECODE_PIPELINE=0 rc=$?"
show <"$OUT/accept_summary.txt"
# At most 8 files come back: everything but issue20.txt goes into one archive.
(cd "$OUT" && tar czf /tmp/issue20_all.tgz --exclude=issue20.txt . && find . -mindepth 1 ! -name issue20.txt -delete && mv /tmp/issue20_all.tgz all.tgz)
