#!/usr/bin/env bash
# Session 40, device call 1 (this session had no device: everything below was built on the CPU
# machine). Build; the CUPTI tracer's own test; the lean quantized GEMV (its bits, the kernel bench,
# 7B int4 and int8 batch 1 against the tile GEMV); then the kernel-time-against-gaps accounting of
# the batch-1 points issue 18.2 and 19.3 miss: V2-Lite bf16, 7B int4, bf16 and fp8 per-channel.
# Run as: run(command: "bash docs/perf/data/2026-12-05-session40/run1.sh", carry: [".devcarry"]),
# with the tree staged under 64 MiB.
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
build
(timeout 120 build-gpu/tests/cuda/cuda_kernel_trace_test >$L/kt_test.log 2>&1; echo "cuda_kernel_trace_test rc $?" >>$S)
grep -E "FAILED|Failure|SKIPPED|PASSED|kernel trace|step " $L/kt_test.log | head -12 >>$S
# The lean quantized GEMV: bit for bit the tile GEMV's (CudaQuantGemv), then kernel and end to end.
(timeout 120 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemv.*' >$L/lean_test.log 2>&1; echo "CudaQuantGemv rc $?" >>$S)
grep -E "FAILED|Failure|differs" $L/lean_test.log | head -6 >>$S
# What FP8 fast accumulation costs at the 7B's depths (k 3584, 18944), against the promoted path.
(timeout 60 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaW8a8.FastAccumulation*' >$L/fastacc.log 2>&1; echo "fast accumulation test rc $?" >>$S)
grep -E "^k=|FAILED|Failure" $L/fastacc.log | head -6 >>$S
(FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 150 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kb_int4_gate.txt 2>&1; echo "kbench rc $?" >>$S)
grep -E "^qgemv(-lean)? m=(1|8) |CHECK.*(lean|FAIL)" $L/kb_int4_gate.txt | head -30 >>$S
B1="--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
e2e q7b_int4_b1_tile /tmp/q7b "" $B1 --precision int4
e2e q7b_int4_b1_lean /tmp/q7b "FRUGAL_QGEMV_KERNEL=lean" $B1 --precision int4
e2e q7b_int8_b1_lean /tmp/q7b "FRUGAL_QGEMV_KERNEL=lean" $B1 --precision int8
# Where a batch-1 step's time goes (issue 18.2 and 19.3): kernels against gaps.
trace v2l_b1 /tmp/v2l "" $B1
trace q7b_int4_b1 /tmp/q7b "" $B1 --precision int4
trace q7b_bf16_b1 /tmp/q7b "" $B1
trace q7b_fp8ch_b1 /tmp/q7b "" $B1 --precision fp8-channel
finish 1
