#!/usr/bin/env bash
# Session 43, device call 1. Issue 18.4 at 1,024 running sequences (FP8 per-channel), first on
# the machine that comes; the lean GEMV's new L2 request (FRUGAL_QGEMV_L2: each block asks L2
# for its 16 rows before the PDL wait) in its tests, its kernel rows and 7B batch 1 (int4, int8,
# fp8 per-channel) against none; session 42's route modes and early=2 (run4.sh there) with
# their tests.
# Run as: run(command: "bash docs/perf/data/2026-12-05-session43/run1.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build; unset TARGETS
T="--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-batched-tokens 8192 --throughput-reps 1"
e2e fp8_tput_1024 /tmp/q7b "" $T --max-num-seqs 1024 --precision fp8-channel
(timeout 100 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemv.*:CudaMoe.*:CudaFused.MoeRouter*' >$L/tests.log 2>&1; echo "CudaQuantGemv + CudaMoe + CudaFused.MoeRouter rc $?" >>$S)
grep -E "FAILED|Failure|PASSED" $L/tests.log | head -8 >>$S
for sh in gate down; do
  (FRUGAL_QBENCH_ONLY="int4g128 $sh" timeout 90 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kb_$sh.txt 2>&1; echo "kbench $sh rc $?" >>$S)
  grep -E "CHECK|FAIL" $L/kb_$sh.txt | grep -v " ok" | head -3 >>$S
  grep -E "qgemv-lean m=[18] .* l2 " $L/kb_$sh.txt | head -8 >>$S
done
B1="--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
for round in 1 2; do
  e2e q7b_int4_b1_$round /tmp/q7b "" $B1 --precision int4
  e2e q7b_int4_b1_l2row_$round /tmp/q7b "FRUGAL_QGEMV_L2=1048576" $B1 --precision int4
done
e2e q7b_int4_b1_l2_2k /tmp/q7b "FRUGAL_QGEMV_L2=2048" $B1 --precision int4
e2e q7b_fp8ch_b1 /tmp/q7b "" $B1 --precision fp8-channel
e2e q7b_fp8ch_b1_l2row /tmp/q7b "FRUGAL_QGEMV_L2=1048576" $B1 --precision fp8-channel
e2e q7b_int8_b1 /tmp/q7b "" $B1 --precision int8
e2e q7b_int8_b1_l2row /tmp/q7b "FRUGAL_QGEMV_L2=1048576" $B1 --precision int8
e2e v2l_b1 /tmp/v2l "" $B1
e2e v2l_b1_early2 /tmp/v2l "FRUGAL_MOE_TINY_EARLY=2" $B1
e2e v2l_b1_route2 /tmp/v2l "FRUGAL_FUSE_ROUTE=2" $B1
e2e v2l_b1_route3 /tmp/v2l "FRUGAL_FUSE_ROUTE=3" $B1
e2e v2l_b1_again /tmp/v2l "" $B1
finish 1
