#!/usr/bin/env bash
# Device call 1 of session 34: early K/V in the decode attention (A/B), prefill chunk sizes.
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s1.txt
STOP=${STOP:-400}
left() { echo $((STOP - (SECONDS-START))); }
TARGETS="frugal cuda_ops_test cuda_kernel_bench cuda_engine_test cuda_golden_test" bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
timeout 150 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaAttention.Decode*:CudaAttention.PrefillChunk*:CudaFused.*' >$L/ops.log 2>&1
echo "ops rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED" $L/ops.log | head >>$S
(cd build-gpu && timeout 100 ctest -R 'cuda_engine_test|cuda_golden_test' -j 2 >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S; grep -E "tests passed|Failed|Passed" $L/ctest.log | head >>$S
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
P32=(--prefill-lens 32768 --reps 2 --warmup 1 --batches 0)
e2e dec32k_e0 "FRUGAL_DECODE_EARLY=0" "${D32[@]}"
e2e dec32k_e1 "FRUGAL_DECODE_EARLY=1" "${D32[@]}"
e2e dec32k_e3 "FRUGAL_DECODE_EARLY=3" "${D32[@]}"
e2e dec32k_e6 "FRUGAL_DECODE_EARLY=6" "${D32[@]}"
e2e dec32k_e0b "FRUGAL_DECODE_EARLY=0" "${D32[@]}"
e2e dec32k_e1_s44 "FRUGAL_DECODE_SPLITS=44" "${D32[@]}"
e2e b1_e0 "FRUGAL_DECODE_EARLY=0" "${B1[@]}"
e2e b1_e1 "FRUGAL_DECODE_EARLY=1" "${B1[@]}"
e2e pre32k_c8k "FRUGAL_X=1" "${P32[@]}" --max-num-batched-tokens 8192
e2e pre32k_c16k "FRUGAL_X=1" "${P32[@]}" --max-num-batched-tokens 16384
e2e pre32k_c32k "FRUGAL_X=1" "${P32[@]}" --max-num-batched-tokens 32768
l=$(left); [ $l -gt 15 ] && { FRUGAL_DABENCH_ONLY=1x32768 timeout $((l-2)) build-gpu/tests/cuda/cuda_kernel_bench --decode-attn >$L/dattn.txt 2>&1; grep -E "x32768" $L/dattn.txt | head -20 >>$S; }
tar czf $OUT/logs1.tgz -C $L --exclude='*.o' . 2>/dev/null
cat $S
