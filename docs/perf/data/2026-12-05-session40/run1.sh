#!/usr/bin/env bash
# Session 40, device call 1 (this session had no device: everything below was built on the CPU
# machine). Build; the CUPTI tracer's own test; then the kernel-time-against-gaps accounting of the
# batch-1 points issue 18.2 and 19.3 miss: V2-Lite bf16, 7B int4, bf16 and fp8 per-channel.
# Run as: run(command: "bash docs/perf/data/2026-12-05-session40/run1.sh", carry: [".devcarry"]),
# with the tree staged under 64 MiB.
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
build
(timeout 120 build-gpu/tests/cuda/cuda_kernel_trace_test >$L/kt_test.log 2>&1; echo "cuda_kernel_trace_test rc $?" >>$S)
grep -E "FAILED|Failure|SKIPPED|PASSED|kernel trace|step " $L/kt_test.log | head -12 >>$S
B1="--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
trace v2l_b1 /tmp/v2l "" $B1
trace q7b_int4_b1 /tmp/q7b "" $B1 --precision int4
trace q7b_bf16_b1 /tmp/q7b "" $B1
trace q7b_fp8ch_b1 /tmp/q7b "" $B1 --precision fp8-channel
finish 1
