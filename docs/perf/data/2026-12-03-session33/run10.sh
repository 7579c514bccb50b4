#!/usr/bin/env bash
# Device call 4 of session 33 (short): the sliced combine and the wide early GEMV loads as
# defaults: build frugal + cuda_ops_test + cuda_kernel_bench; the GEMV and decode tests; A/B e2e.
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s10.txt
STOP=${STOP:-270}
left() { echo $((STOP - (SECONDS-START))); }
TARGETS="frugal cuda_ops_test cuda_kernel_bench" bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
timeout 60 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaOps.Gemv*:CudaAttention.DecodeTuningDispatch:CudaAttention.DecodeSplitKv:CudaAttention.DecodeLargeBatchOneLongContext:CudaAttention.PrefillChunkOverLongContextSplitsKeys:CudaAttention.DecodeMmaDispatch' >$L/ops.log 2>&1
echo "ops rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^\[  (PASSED|FAILED)|tests ran" $L/ops.log | head >>$S
source scripts/gpu/lib.sh
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
F=(build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 --dummy-weights /tmp/q7b/config.json)
e2e() { # name env args...
  local name=$1 envs=$2; shift 2
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  env $envs timeout $((l-2)) "${F[@]}" "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|^prefill" $L/$name.txt | tail -1 >>$S
}
D32=(--prefill-lens 0 --reps 2 --warmup 1 --batches 1 --decode-prompt-len 32768 --decode-tokens 128 --max-num-batched-tokens 8192)
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
e2e dec32k "FRUGAL_X=1" "${D32[@]}"
e2e b1 "FRUGAL_X=1" "${B1[@]}"
e2e dec32k_early1 "FRUGAL_GEMV_EARLY=1" "${D32[@]}"
e2e b1_early1 "FRUGAL_GEMV_EARLY=1" "${B1[@]}"
e2e b1_nosplit "FRUGAL_GEMV_SPLITK=0" "${B1[@]}"
e2e dec32k_nosplit "FRUGAL_GEMV_SPLITK=0" "${D32[@]}"
l=$(left); [ $l -gt 12 ] && { timeout $((l-2)) build-gpu/tests/cuda/cuda_kernel_bench --gemv >$L/gemv.txt 2>&1; grep "gemv-ab m=1" $L/gemv.txt | head -40 >>$S; }
tar czf $OUT/logs10.tgz -C $L --exclude='*.o' . 2>/dev/null
cat $S
