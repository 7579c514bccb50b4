#!/usr/bin/env bash
# Session 42, device call 4 (the H100 again; the last of the session's device time): the tiny
# MoE down kernel asking L2 for its routed pairs' down rows before the PDL wait
# (FRUGAL_MOE_TINY_EARLY=2) against the default (shared rows only): CudaMoe.*, then V2-Lite
# batch 1 default / level 2 / default / level 2 on one machine.
# Run as: run(command: "bash docs/perf/data/2026-12-05-session42/run4.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s4.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test"; build; unset TARGETS
B1="--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
e2e v2l_b1 /tmp/v2l "" $B1
e2e v2l_b1_early2 /tmp/v2l "FRUGAL_MOE_TINY_EARLY=2" $B1
(timeout 40 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaMoe.*' >$L/moe_test.log 2>&1; echo "CudaMoe rc $?" >>$S)
grep -E "FAILED|Failure|PASSED" $L/moe_test.log | head -6 >>$S
e2e v2l_b1_again /tmp/v2l "" $B1
e2e v2l_b1_early2_again /tmp/v2l "FRUGAL_MOE_TINY_EARLY=2" $B1
finish 4
