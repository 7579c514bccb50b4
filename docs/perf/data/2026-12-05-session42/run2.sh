#!/usr/bin/env bash
# Session 42, device call 2 (wanted on an H200: the targets' machine). Issue 18.4 at 256, 512
# and 1024 running sequences (FP8 per-channel, bf16 KV; then FP8 KV at 1024; bf16 for the
# ratio); the batch-1 points of 18.2 and 19.3 with this session's defaults (the rank route, the
# slab GEMM's two chains); 18.3 at 16 and 64 sequences; V2-Lite 1000 x 128/128 (19.3);
# V2-Lite's batch-1 kernel trace; the tiny MoE down kernel's routed rows before the PDL wait
# (FRUGAL_MOE_TINY_EARLY=2) against the default. (The MLA split and merge A/Bs ran on the H100:
# run3.sh.)
# Run as: run(command: "bash docs/perf/data/2026-12-05-session42/run2.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test"; build; unset TARGETS
T="--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-batched-tokens 8192 --throughput-reps 2"
T1=${T/--throughput-reps 2/--throughput-reps 1}
e2e fp8_tput_1024 /tmp/q7b "" $T --max-num-seqs 1024 --precision fp8-channel
e2e fp8_tput_256 /tmp/q7b "" $T1 --max-num-seqs 256 --precision fp8-channel
B1="--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
# The tiny MoE down kernel asking L2 for its routed pairs' rows before the PDL wait too (level 2).
(timeout 90 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaMoe.*' >$L/moe_test.log 2>&1; echo "CudaMoe rc $?" >>$S)
grep -E "FAILED|Failure|PASSED" $L/moe_test.log | head -6 >>$S
e2e v2l_b1 /tmp/v2l "" $B1
e2e v2l_b1_early2 /tmp/v2l "FRUGAL_MOE_TINY_EARLY=2" $B1
e2e q7b_int4_b1 /tmp/q7b "" $B1 --precision int4
e2e q7b_int8_b1 /tmp/q7b "" $B1 --precision int8
e2e q7b_fp8ch_b1 /tmp/q7b "" $B1 --precision fp8-channel
e2e q7b_bf16_b1 /tmp/q7b "" $B1
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e q7b_int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
e2e q7b_bf16_b16 /tmp/q7b "" $B --batches 16
e2e q7b_int4_b64 /tmp/q7b "" $B --batches 64 --precision int4
e2e q7b_bf16_b64 /tmp/q7b "" $B --batches 64
e2e fp8_tput_1024_kv8 /tmp/q7b "" $T1 --max-num-seqs 1024 --precision fp8-channel --kv-cache-dtype fp8
e2e bf16_tput_1024 /tmp/q7b "" $T1 --max-num-seqs 1024
e2e v2l_tput_256 /tmp/v2l "" $T1 --max-num-seqs 256
trace v2l_b1 /tmp/v2l "" $B1
finish 2
