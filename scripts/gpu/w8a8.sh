#!/usr/bin/env bash
# Issue 18 acceptance 4 on the GPU machine, one call: build; the W8A8 test and the CUDA op
# harness; then the dummy 7B in FP8 (DeepSeek-V3 128 x 128 blocks) with W8A8 on and off
# (FRUGAL_FP8_W8A8=0: dequantize + bf16 cuBLASLt): 2048-token prefill and 1000 x 128/128
# throughput, and bf16 for reference; also the quantized-checkpoint fixtures on CUDA. Logs under
# $OUT, a short table last.
#   MODES (default "w8a8 dequant bf16"), SKIP_BUILD=1, SKIP_TESTS=1
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
[ "${SKIP_BUILD:-0}" = 1 ] || TARGETS="frugal cuda_ops_test cuda_harness_test cuda_quant_model_test" bash scripts/gpu/check.sh build || exit 1
B=build-gpu
T="$OUT/w8a8_summary.txt"
: >"$T"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  "$B/tests/cuda/cuda_ops_test" --gtest_filter='CudaW8a8*:CudaOps.Matmul*' >"$OUT/w8a8_test.log" 2>&1
  echo "== cuda_ops_test (W8A8, matmul) rc $?" >>"$T"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]|got |did not take" "$OUT/w8a8_test.log" | head -20 >>"$T"
  "$B/tests/cuda/cuda_harness_test" >"$OUT/harness.log" 2>&1
  echo "== cuda_harness_test rc $?" >>"$T"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/harness.log" | head -20 >>"$T"
  "$B/tests/cuda/cuda_quant_model_test" >"$OUT/quant_model.log" 2>&1  # checkpoint fixtures (tests/data/quant)
  echo "== cuda_quant_model_test rc $?" >>"$T"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/quant_model.log" | head -20 >>"$T"
fi
for mode in ${MODES:-w8a8 dequant bf16}; do
  pr=fp8; env=()
  [ "$mode" = dequant ] && env=(FRUGAL_FP8_W8A8=0)
  [ "$mode" = bf16 ] && pr=bf16
  env "${env[@]}" "$B/src/cli/frugal" bench offline --dummy-weights /tmp/q7b/config.json --device cuda --gpu h200 \
    --ceiling-gbps 4259 --ceiling-tflops 790 --precision "$pr" --prefill-lens 2048 --reps 3 --warmup 1 --batches 0 \
    --num-prompts 1000 --input-len 128 --output-len 128 --throughput-reps 2 --max-num-seqs 256 \
    --max-num-batched-tokens 8192 --json "$OUT/w8a8_$mode.json" >"$OUT/w8a8_$mode.txt" 2>&1
  echo "== $mode ($pr) rc $?" >>"$T"
  grep -vE "^ceilings|^bench  " "$OUT/w8a8_$mode.txt" | tail -8 >>"$T"
done
echo "===== w8a8 summary ====="
cat "$T"
