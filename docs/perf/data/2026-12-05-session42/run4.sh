#!/usr/bin/env bash
# Session 42's A/Bs for V2-Lite batch 1 that no device ran (built after the device time ran
# out), on one machine of either kind:
#  - the tiny MoE down kernel asking L2 for its routed pairs' down rows before the PDL wait
#    (FRUGAL_MOE_TINY_EARLY=2) against the default (shared rows only);
#  - the router fused: the cluster kernel after the norm's own kernel (FRUGAL_FUSE_ROUTE=2), and
#    the grid kernel whose last block routes (=3), against the three ops (the default).
# Tests first: CudaMoe.* and CudaFused.MoeRouter*.
# Run as: run(command: "bash docs/perf/data/2026-12-05-session42/run4.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s4.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test"; build; unset TARGETS
B1="--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
(timeout 60 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaMoe.*:CudaFused.MoeRouter*' >$L/moe_test.log 2>&1; echo "CudaMoe + CudaFused.MoeRouter rc $?" >>$S)
grep -E "FAILED|Failure|PASSED" $L/moe_test.log | head -6 >>$S
for round in 1 2; do
  e2e v2l_b1_$round /tmp/v2l "" $B1
  e2e v2l_b1_early2_$round /tmp/v2l "FRUGAL_MOE_TINY_EARLY=2" $B1
  e2e v2l_b1_route2_$round /tmp/v2l "FRUGAL_FUSE_ROUTE=2" $B1
  e2e v2l_b1_route3_$round /tmp/v2l "FRUGAL_FUSE_ROUTE=3" $B1
done
finish 4
