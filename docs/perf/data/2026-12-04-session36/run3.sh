#!/usr/bin/env bash
# Device call 3 of session 36: build; the MoE and W8A8 tests, the goldens; cuda_kernel_bench --moe
# (the batch-1/2 path with shared experts); V2-Lite batch 1 with the two-kernel MoE path and
# without; 7B FP8 1000 x 128/128 with the cuBLASLt algorithm of m rounded up to 128 and without.
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s3.txt
STOP=${STOP:-480}
left() { echo $((STOP - (SECONDS-START))); }
bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
T=build-gpu/tests/cuda
timeout 150 $T/cuda_ops_test --gtest_filter='CudaMoe*:CudaOps.Moe*:CudaW8a8.*:CudaFused.*' >$L/ops.log 2>&1; echo "ops rc $? ($((SECONDS-START)) s)" >>$S
grep -E "^\[  FAILED|PASSED|tests ran|Failure" $L/ops.log | head -12 >>$S
timeout 90 $T/cuda_harness_test --gtest_filter='*oe*:*atmul*:*ilu*' >$L/harness.log 2>&1; echo "harness rc $? ($((SECONDS-START)) s)" >>$S
grep -E "^\[  FAILED|PASSED|tests ran" $L/harness.log | head -8 >>$S
timeout 90 build-gpu/tests/cuda_golden/cuda_golden_test >$L/golden.log 2>&1; echo "golden rc $? ($((SECONDS-START)) s)" >>$S
grep -E "^\[  FAILED|PASSED|tests ran" $L/golden.log | head -8 >>$S
timeout 40 $T/cuda_kernel_bench --moe >$L/kb_moe.txt 2>&1; echo "kb moe rc $? ($((SECONDS-START)) s)" >>$S
grep -E "^moe" $L/kb_moe.txt | grep -E "\[" | cut -c1-120 | head -16 >>$S
source scripts/gpu/lib.sh
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
catalog_config deepseek-v2-lite /tmp/v2l
e2e() { # name cfg env args...
  local name=$1 cfg=$2 envs=$3; shift 3
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  env $envs timeout $((l-2)) build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights $cfg/config.json "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|^prefill|^throughput|output tok|engine:" $L/$name.txt | tail -4 >>$S
}
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
e2e v2l_b1 /tmp/v2l "FRUGAL_X=1" "${B1[@]}"
e2e v2l_b1_notiny /tmp/v2l "FRUGAL_MOE_TINY=0" "${B1[@]}"
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192)
e2e tp_fp8ch_round /tmp/q7b "FRUGAL_X=1" "${TP[@]}" --throughput-reps 2 --precision fp8-channel
e2e tp_fp8ch_noround /tmp/q7b "FRUGAL_FP8_LT_ROUND_M=0" "${TP[@]}" --throughput-reps 1 --precision fp8-channel
e2e v2l_b2 /tmp/v2l "FRUGAL_X=1" --prefill-lens 0 --batches 2 --decode-prompt-len 128 --decode-tokens 128 --reps 1
e2e v2l_tp /tmp/v2l "FRUGAL_X=1" "${TP[@]}" --throughput-reps 1
cp $OUT/*.txt $L/ 2>/dev/null
tar czf $OUT/logs3.tgz -C $L --exclude='*.o' . 2>/dev/null
cat $S
