#!/usr/bin/env bash
# Issue 20 on the GPU machine in one call (docs/perf/2026-12-02-kv-precision.md): build the CLI
# and the CUDA tests, the op harness (fp8/int8 KV, sinks) and CudaOps, the 32k long-context
# runs per KV dtype (decode also with FRUGAL_DECODE_PIPELINE=0 for the A/B), the 1024/1024
# throughput per KV dtype, then the engine batch invariance per KV variant. Each step is
# time-boxed so the call ends inside the device budget; logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/frugal-out}"; mkdir -p "$OUT"
T0=$SECONDS
say() { echo "[$((SECONDS - T0)) s] $*" | tee -a "$OUT/issue20.txt"; }
TARGETS="frugal cuda_harness_test cuda_ops_test cuda_engine_test" bash scripts/gpu/check.sh build || exit 1
say "built"
B=build-gpu
timeout 60 "$B/tests/cuda/cuda_harness_test" >"$OUT/harness.log" 2>&1; say "harness rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/harness.log" | head -8 | tee -a "$OUT/issue20.txt"
timeout 60 "$B/tests/cuda/cuda_ops_test" >"$OUT/ops.log" 2>&1; say "cuda_ops_test rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/ops.log" | head -8 | tee -a "$OUT/issue20.txt"
timeout 90 bash scripts/gpu/accept.sh long32k >/dev/null 2>&1; say "long32k rc=$?"
cat "$OUT/accept_summary.txt" >>"$OUT/issue20.txt"
mkdir -p "$OUT/keep"; cp "$OUT"/long32k_* "$OUT/keep/" 2>/dev/null
KV_DTYPES=bf16 FRUGAL_DECODE_PIPELINE=0 timeout 40 bash scripts/gpu/accept.sh long32k >/dev/null 2>&1
say "long32k bf16 pipeline off rc=$?"
for f in "$OUT"/long32k_bf16.*; do mv "$f" "${f/long32k_bf16/long32k_bf16_nopipe}"; done; cp "$OUT"/keep/* "$OUT/"; rm -rf "$OUT/keep"
cat "$OUT/accept_summary.txt" >>"$OUT/issue20.txt"
timeout 60 bash scripts/gpu/accept.sh kvtput >/dev/null 2>&1; say "kvtput rc=$?"
cat "$OUT/accept_summary.txt" >>"$OUT/issue20.txt"
timeout 90 "$B/tests/cuda_engine/cuda_engine_test" --gtest_filter='*stories260K*:*Kv*' >"$OUT/engine.log" 2>&1
say "cuda_engine_test rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|OK \]" "$OUT/engine.log" | head -12 | tee -a "$OUT/issue20.txt"
cat "$OUT/issue20.txt"
# At most 8 files come back: everything goes into one archive beside the summary.
cp "$OUT/issue20.txt" /tmp/issue20.txt; tar czf /tmp/issue20_all.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/issue20_all.tgz "$OUT/all.tgz" && mv /tmp/issue20.txt "$OUT/"
