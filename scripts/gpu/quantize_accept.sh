#!/usr/bin/env bash
# Issue 17 on the GPU machine in one go: build frugal and cuda_quantize_test, run the CUDA-vs-host
# test, write transformers' logits on a frugal-written FP8 block directory of the golden qwen2_tied
# (its MLP kept: 320 is no multiple of transformers' 128 block; fp8_transformers_logits.py, the
# oracle of tests/quantize/fp8_transformers_test.cpp), and time
# AWQ and GPTQ int4 of the 7B configuration (quantize.sh). The 7B random checkpoint is written
# while the build runs. Results in $OUT (at most 8 files: the device tool's limit):
#   summary.txt, cuda_quantize_test.log, fp8.log, qwen2_tied_fp8_block_hf_logits.safetensors,
#   quantize_summary.txt, quantize_awq.txt, quantize_gptq.txt, build_errors.txt (on failure)
#   bash scripts/gpu/quantize_accept.sh [CALIB_TOKENS]
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
S="$OUT/summary.txt"
: >"$S"
t0=$SECONDS
CKPT=/tmp/quant_src_deepseek-r1-distill-qwen-7b
( python3 scripts/gpu/make_7b_checkpoint.py data/catalog/models/deepseek-r1-distill-qwen-7b.json "$CKPT" >/tmp/ckpt.log 2>&1;
  echo "checkpoint rc $? at $((SECONDS - t0)) s, $(du -sh "$CKPT" | cut -f1)" >/tmp/ckpt.done ) &
CK=$!
OUT=/tmp/chk TARGETS="frugal cuda_quantize_test" bash scripts/gpu/check.sh build >/tmp/chk.txt 2>&1
brc=$?
cat /tmp/chk/summary.txt >>"$S"
if [ $brc -ne 0 ]; then grep -E "error|FAILED" /tmp/chk/build.log | head -60 >"$OUT/build_errors.txt"; wait $CK; exit 1; fi
timeout 200 build-gpu/tests/cuda/cuda_quantize_test >"$OUT/cuda_quantize_test.log" 2>&1
echo "cuda_quantize_test rc $? ($((SECONDS - t0)) s)" >>"$S"
grep -E "^\[  (PASSED|FAILED) |^\[       OK|^\[  FAILED" "$OUT/cuda_quantize_test.log" >>"$S"
rm -rf /tmp/tied_fp8
( build-gpu/src/cli/frugal quantize --model tests/data/golden/qwen2_tied --format fp8 --keep gate_proj,up_proj,down_proj \
    --out /tmp/tied_fp8 | tail -1 &&
  sha256sum /tmp/tied_fp8/*.safetensors &&
  timeout 200 python3 scripts/gpu/fp8_transformers_logits.py /tmp/tied_fp8 "$OUT/qwen2_tied_fp8_block_hf_logits.safetensors" ) >"$OUT/fp8.log" 2>&1
echo "fp8 oracle rc $? ($((SECONDS - t0)) s)" >>"$S"
wait $CK
cat /tmp/ckpt.done >>"$S" 2>/dev/null || tail -5 /tmp/ckpt.log >>"$S"
QUANT_TIMEOUT="${QUANT_TIMEOUT:-240}" bash scripts/gpu/quantize.sh deepseek-r1-distill-qwen-7b "${1:-512}" >/tmp/qz.txt 2>&1
cat "$OUT/quantize_summary.txt" >>"$S"
echo "total $((SECONDS - t0)) s" >>"$S"
cat "$S"
