#!/usr/bin/env bash
# Issue 18 on the GPU machine, one call: build the CLI, the op harness and the kernel bench;
# run the CUDA op harness; cuda_kernel_bench --quant (checks the quantized GEMV against the
# correctness kernel on the 7B shapes, then times it; dequantize + cuBLASLt at m = 2048); then
# batch-1 decode (128 in / 256 out) with dummy 7B weights per precision (PRECISIONS, default
# "int4 int8 fp8"; PREFILL=2048 adds a prefill point); BATCHES=16,64 adds decode at those
# concurrencies (512 in / 128 out) per precision, once per GEMM kernel in QGEMM_KERNELS (default
# "pipe"; "pipe quad" adds the one-quad GEMM for A/B). Logs under $OUT, short table last.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
[ "${SKIP_BUILD:-0}" = 1 ] || TARGETS="frugal cuda_kernel_bench cuda_harness_test cuda_quant_model_test cuda_ops_test" bash scripts/gpu/check.sh build || exit 1
B=build-gpu
T="$OUT/quant_summary.txt"
: >"$T"
if [ "${SKIP_HARNESS:-0}" != 1 ]; then
  "$B/tests/cuda/cuda_harness_test" >"$OUT/harness.log" 2>&1
  echo "== harness rc $?" >>"$T"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/harness.log" | head -20 >>"$T"
  "$B/tests/cuda/cuda_ops_test" --gtest_filter='CudaQuantGemm.*' >>"$OUT/harness.log" 2>&1
  echo "== CudaQuantGemm rc $?" >>"$T"
  if [ -d tests/data/quant ]; then  # the checkpoint fixtures (carry them: devprep ... tests/data/quant)
    "$B/tests/cuda/cuda_quant_model_test" >>"$OUT/harness.log" 2>&1
    echo "== cuda_quant_model_test rc $?" >>"$T"
    grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/harness.log" | tail -20 >>"$T"
  fi
fi
"$B/tests/cuda/cuda_kernel_bench" --quant >"$OUT/qbench.log" 2>&1
echo "== qbench rc $?" >>"$T"
grep -E "^CHECK" "$OUT/qbench.log" | grep -v " ok$" >>"$T"
echo "checks ok: $(grep -c '^CHECK.* ok$' "$OUT/qbench.log")" >>"$T"
sed -n '/=== cuda_kernel_bench summary/,$p' "$OUT/qbench.log" >>"$T"
for pr in ${PRECISIONS:-int4 int8 fp8}; do
  "$B/src/cli/frugal" bench offline --dummy-weights /tmp/q7b/config.json --device cuda --gpu h200 \
    --ceiling-gbps 4259 --ceiling-tflops 790 --precision "$pr" --prefill-lens "${PREFILL:-0}" --batches 1 \
    --decode-prompt-len 128 --decode-tokens 256 --reps "${REPS:-2}" --warmup 1 >"$OUT/off_$pr.txt" 2>&1
  echo "== offline $pr rc $?" >>"$T"
  grep -vE "^ceilings|^bench  " "$OUT/off_$pr.txt" | tail -8 >>"$T"
done
if [ -n "${BATCHES:-}" ]; then
  for kn in ${QGEMM_KERNELS:-pipe}; do
    for pr in ${PRECISIONS:-int4 int8 fp8}; do
      FRUGAL_QGEMM_KERNEL=$kn "$B/src/cli/frugal" bench offline --dummy-weights /tmp/q7b/config.json --device cuda --gpu h200 \
        --ceiling-gbps 4259 --ceiling-tflops 790 --precision "$pr" --prefill-lens 0 --batches "$BATCHES" \
        --decode-prompt-len 512 --decode-tokens 128 --reps "${REPS:-2}" --warmup 1 --max-num-seqs 64 \
        --json "$OUT/batches_${pr}_$kn.json" >"$OUT/batches_${pr}_$kn.txt" 2>&1
      echo "== batches $BATCHES $pr qgemm $kn rc $?" >>"$T"
      grep -E "^decode" "$OUT/batches_${pr}_$kn.txt" >>"$T"
    done
  done
fi
echo "===== quant summary ====="
cat "$T"
