#!/usr/bin/env bash
# Session 49, run 4 (written for the next device call; it has not run): the slab GEMM's
# shared-memory ring for codes at m <= 16 (FRUGAL_QSLAB_RING=1, opt-in; three blocks an SM at
# <= 80 registers, ptxas 13, no spills), then the issue points if the machine is an H200.
# 1. Correctness: the ring against the register path's bits on row-major and tiled codes
#    (CudaInt4Tiles8.*) and against the dequantized oracle in every format (CudaQuantGemm.*).
# 2. The kernel rows (int4 g128 gate at m = 16, both paths) and 7B end to end at 12 / 16
#    sequences (int4, int8), ring against the default.
# 3. On an H200: 18.2 (batch 1, all precisions), 18.3 (16 / 64), 19.3 (V2-Lite batch 1).
# Run as: run(command: "bash docs/perf/data/2026-12-06-session49/run4.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s4.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build; unset TARGETS
(timeout 150 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaInt4Tiles8.*:CudaQuantGemm.*' >$L/ring_tests.log 2>&1
 echo "ring tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|OK \]|bits differ" $L/ring_tests.log | head -12 >>$S
(FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 90 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kq.txt 2>&1
 echo "kbench rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^CHECK .*slabring|qgemm-slab(2ch|ring) m=(9|16) " $L/kq.txt | head -12 >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
for b in 16 12; do
  e2e int4_b${b} /tmp/q7b "" $B --batches $b --precision int4
  e2e int4_b${b}_ring /tmp/q7b "FRUGAL_QSLAB_RING=1" $B --batches $b --precision int4
done
e2e int8_b16 /tmp/q7b "" $B --batches 16 --precision int8
e2e int8_b16_ring /tmp/q7b "FRUGAL_QSLAB_RING=1" $B --batches 16 --precision int8
if grep -q H200 $S; then
  B1="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
  for prec in int4 int8 fp8-channel; do e2e ${prec}_b1 /tmp/q7b "" $B1 --batches 1 --precision $prec; done
  e2e bf16_b1 /tmp/q7b "" $B1 --batches 1
  e2e bf16_b16 /tmp/q7b "" $B --batches 16
  e2e int4_b64 /tmp/q7b "" $B --batches 64 --precision int4
  e2e bf16_b64 /tmp/q7b "" $B --batches 64
  e2e v2l_b1 /tmp/v2l "" --prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1
fi
finish 4
