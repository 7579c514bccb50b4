#!/usr/bin/env bash
# Session 38, device call 3 (run3.sh's lines, after run 1 and 2): the slab GEMM's fixes (its
# shared-memory limit was set to 0 by the occupancy query before it was raised: every launch
# failed with invalid argument; the harness instance had no support table), its tests, kernel
# rows and end-to-end lines; V2-Lite batch 1 with the tiny MoE kernels' early prefetch now the
# default; the 7B lines of 18.2 and 18.4 (fused norm, FP8).
source docs/perf/data/2026-12-05-session38/lib.sh
S=$OUT/s4.txt
build
T=build-gpu/tests/cuda
(timeout 60 $T/cuda_ops_test --gtest_filter='CudaQuantGemm.*' >$L/qgemm.log 2>&1; echo "qgemm rc $?" >>$S)
(timeout 90 $T/cuda_harness_test --gtest_filter='CudaSlab/*' >$L/harness_slab.log 2>&1; echo "harness slab rc $?" >>$S)
(timeout 60 $T/cuda_quant_model_test >$L/qmodel.log 2>&1; echo "quant model rc $?" >>$S)
grep -hE "FAILED|Failure|tests from|PASSED" $L/qgemm.log $L/harness_slab.log $L/qmodel.log | head -12 >>$S
grep -hE "Failure" -A6 $L/qgemm.log $L/harness_slab.log $L/qmodel.log | head -30 >>$S
FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 40 $T/cuda_kernel_bench --quant >$L/kbench_gate.txt 2>&1
FRUGAL_QBENCH_ONLY="int4g128 down" timeout 40 $T/cuda_kernel_bench --quant >$L/kbench_down.txt 2>&1
echo "kbench ($((SECONDS-START)) s)" >>$S
grep -hE "slab|qgemv m=(1|16|32|64) |FAIL" $L/kbench_gate.txt $L/kbench_down.txt | grep -v "silu" | head -50 >>$S
SLAB="FRUGAL_QGEMM_KERNEL=slab FRUGAL_QGEMM_MIN_M=9"
CONC=(--prefill-lens 0 --batches 16,64 --decode-prompt-len 512 --decode-tokens 128 --reps 2 --warmup 1 --max-num-seqs 64)
e2e q7b_int4_conc_slab /tmp/q7b "$SLAB" "${CONC[@]}" --precision int4
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
SLAB1="FRUGAL_QGEMM_KERNEL=slab FRUGAL_QGEMM_MIN_M=1"
e2e q7b_int4_b1_slab /tmp/q7b "$SLAB1" "${B1[@]}" --precision int4
e2e q7b_int4_b1_base /tmp/q7b "FRUGAL_X=1" "${B1[@]}" --precision int4
e2e v2l_b1_default /tmp/v2l "FRUGAL_X=1" "${B1[@]}"
e2e q7b_b1_base /tmp/q7b "FRUGAL_X=1" "${B1[@]}"
e2e q7b_b1_norm /tmp/q7b "FRUGAL_FUSE_NORM=1" "${B1[@]}"
e2e q7b_int8_b1_slab /tmp/q7b "$SLAB1" "${B1[@]}" --precision int8
e2e q7b_fp8_b1_slab /tmp/q7b "$SLAB1" "${B1[@]}" --precision fp8-channel
l=$(left); if [ $l -gt 60 ]; then
  timeout $((l-10)) bash docs/perf/data/2026-12-05-session38/gaps.sh /tmp/v2l v2l_b1 --prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 24 --reps 1 --warmup 0 >>$S 2>&1
  echo "gaps rc $? ($((SECONDS-START)) s)" >>$S
fi
P2K=(--prefill-lens 2048 --reps 3 --warmup 1 --batches 0 --precision fp8-channel)
e2e q7b_p2k_norm /tmp/q7b "FRUGAL_FUSE_NORM=1" "${P2K[@]}"
e2e q7b_p2k_base /tmp/q7b "FRUGAL_X=1" "${P2K[@]}"
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192 --throughput-reps 1)
e2e q7b_tp_fp8_norm /tmp/q7b "FRUGAL_FUSE_NORM=1" "${TP[@]}" --precision fp8-channel
e2e q7b_tp_fp8_base /tmp/q7b "FRUGAL_X=1" "${TP[@]}" --precision fp8-channel
finish 4
