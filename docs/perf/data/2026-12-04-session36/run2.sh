#!/usr/bin/env bash
# Device call 2 of session 36: build; the streaming FP8 GEMM's tests (also under memcheck), the
# W8A8 / fused / harness / golden tests; its kernel bench rows against cuBLASLt; 7B FP8
# 1000 x 128/128 with it and without; a kernel profile of a 256-sequence FP8 decode step.
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s2.txt
STOP=${STOP:-575}
left() { echo $((STOP - (SECONDS-START))); }
bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
T=build-gpu/tests/cuda
timeout 120 $T/cuda_ops_test --gtest_filter='CudaFp8Stream.*:CudaW8a8.*:CudaFused.*' >$L/ops.log 2>&1; echo "ops rc $? ($((SECONDS-START)) s)" >>$S
grep -E "^\[  FAILED|PASSED|tests ran|Failure" $L/ops.log | head -12 >>$S
timeout 60 compute-sanitizer --tool memcheck $T/cuda_ops_test --gtest_filter='CudaFp8Stream.AgainstOracle' >$L/memcheck.log 2>&1; echo "memcheck rc $? ($((SECONDS-START)) s)" >>$S
grep -E "ERROR SUMMARY|PASSED|FAILED" $L/memcheck.log | head -4 >>$S
timeout 90 $T/cuda_harness_test --gtest_filter='*atmul*:*ilu*:*ope*' >$L/harness.log 2>&1; echo "harness rc $? ($((SECONDS-START)) s)" >>$S
grep -E "^\[  FAILED|PASSED|tests ran" $L/harness.log | head -8 >>$S
timeout 90 build-gpu/tests/cuda_golden/cuda_golden_test >$L/golden.log 2>&1; echo "golden rc $? ($((SECONDS-START)) s)" >>$S
grep -E "^\[  FAILED|PASSED|tests ran" $L/golden.log | head -8 >>$S
FRUGAL_QBENCH_ONLY=w8a8 timeout 60 $T/cuda_kernel_bench --quant >$L/kb_w8a8.txt 2>&1; echo "kb rc $? ($((SECONDS-START)) s)" >>$S
grep -E "w8a8|fp8_stream" $L/kb_w8a8.txt | cut -c1-150 | head -40 >>$S
source scripts/gpu/lib.sh
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
e2e() { # name cfg env args...
  local name=$1 cfg=$2 envs=$3; shift 3
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  env $envs timeout $((l-2)) build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights $cfg/config.json "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|^prefill|^throughput|output tok|engine:" $L/$name.txt | tail -4 >>$S
}
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192)
e2e tp_fp8ch_stream /tmp/q7b "FRUGAL_X=1" "${TP[@]}" --throughput-reps 2 --precision fp8-channel
e2e tp_fp8ch_lt /tmp/q7b "FRUGAL_FP8_STREAM=0" "${TP[@]}" --throughput-reps 1 --precision fp8-channel
e2e tp_fp8_stream /tmp/q7b "FRUGAL_X=1" "${TP[@]}" --throughput-reps 1 --precision fp8
l=$(left); if [ $l -gt 50 ]; then PRECISION=fp8-channel timeout $((l-5)) bash scripts/gpu/kernel_profile.sh deepseek-r1-distill-qwen-7b 2 256 4 >$L/prof.log 2>&1; echo "prof rc $? ($((SECONDS-START)) s)" >>$S; fi
e2e b16_fp8ch /tmp/q7b "FRUGAL_X=1" --prefill-lens 0 --batches 16,64 --decode-prompt-len 512 --decode-tokens 128 --reps 1 --warmup 1 --max-num-seqs 64 --precision fp8-channel
cp $OUT/*.txt $L/ 2>/dev/null
tar czf $OUT/logs2.tgz -C $L --exclude='*.o' . 2>/dev/null
cat $S
for f in $OUT/prof_*.txt; do echo "#### $f"; head -24 $f | cut -c1-180; done
