#!/usr/bin/env bash
# Device call 2 of session 34: the FA3 prefill kernel (tests, kernel rows, 32k prefill), the
# decode latency trims (GEMV epilogue preloads, rms_norm weight early, float4 greedy argmax).
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s2.txt
STOP=${STOP:-470}
left() { echo $((STOP - (SECONDS-START))); }
TARGETS="frugal cuda_ops_test cuda_kernel_bench cuda_engine_test cuda_golden_test" bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
T=build-gpu/tests/cuda/cuda_ops_test
timeout 90 $T --gtest_filter='CudaAttention.PrefillFa3*' >$L/fa3_smoke.log 2>&1
FA3RC=$?; echo "fa3 smoke rc $FA3RC ($((SECONDS-START)) s)" >>$S; grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|error" $L/fa3_smoke.log | head -12 >>$S
if [ $FA3RC -eq 0 ]; then
  timeout 150 $T --gtest_filter='CudaAttention.Prefill*' >$L/prefill.log 2>&1
  echo "prefill tests rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^\[  (PASSED|FAILED)|FAILED" $L/prefill.log | head -8 >>$S
fi
timeout 60 $T --gtest_filter='CudaSampling.*:CudaGraph.*:CudaOps.RmsNorm:CudaOps.Gemv*:CudaOps.MatmulGemvRange:CudaFused.*' >$L/ops.log 2>&1
echo "ops rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^\[  (PASSED|FAILED)|FAILED" $L/ops.log | head -8 >>$S
l=$(left); [ $l -gt 40 ] && { FRUGAL_ABENCH_ONLY="len=8192 ctx=32768" timeout 60 build-gpu/tests/cuda/cuda_kernel_bench --attn >$L/attn.txt 2>&1; echo "attn bench rc $?" >>$S; grep -E "attn prefill" $L/attn.txt | head -12 >>$S; }
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
P32=(--prefill-lens 32768 --reps 2 --warmup 1 --batches 0 --max-num-batched-tokens 8192)
if [ $FA3RC -eq 0 ]; then
  e2e pre32k_fa3_1 "FRUGAL_PREFILL_FA3=1" "${P32[@]}"
  e2e pre32k_fa3_2 "FRUGAL_PREFILL_FA3=2" "${P32[@]}"
fi
e2e pre32k_fa3_0 "FRUGAL_PREFILL_FA3=0" "${P32[@]}"
e2e dec32k "FRUGAL_X=1" "${D32[@]}"
e2e b1 "FRUGAL_X=1" "${B1[@]}"
e2e dec32k_b "FRUGAL_X=1" "${D32[@]}"
e2e b1_b "FRUGAL_X=1" "${B1[@]}"
l=$(left); [ $l -gt 60 ] && { timeout 50 build-gpu/tests/cuda_engine/cuda_engine_test >$L/engine.log 2>&1; echo "engine rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^\[  (PASSED|FAILED)|FAILED" $L/engine.log | head -5 >>$S; }
tar czf $OUT/logs2.tgz -C $L --exclude='*.o' . 2>/dev/null
cat $S
