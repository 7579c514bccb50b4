#!/usr/bin/env bash
# Session 63, run 7 (built, not run: no device was lent this session): session 62's run 5
# (built, never run) plus one more switch, in one call.
# run7.diff = run5.diff (docs/perf/data/2026-12-07-session62/run5.sh says what each switch is
# and predicts) + FRUGAL_QSLAB_WG_GSUMS=1: the warpgroup kernel at 64 tokens a pass keeps each
# (quad, token)'s x sum in global memory (its own region after the partials, read back through
# L1) instead of after the x tiles in shared memory, and plans its slices against a block's whole
# shared memory (227 KB) instead of 200 KB: 14 quads of x a slice, so gate_up (k = 3,584, 28
# quads) takes 2 slices instead of 3 (down keeps 13: the planner's cost). Session 62's H200
# accounting: the split-k epilogues cost +16.4 us a layer over bf16's, the split silu alone +7.1
# (29 MB of f32 partials after gate_up). Prediction: gate_up's partials 29 -> 19 MB, the split
# silu ~-3 us, gate_up itself about even (the same units a walker: 5 groups x 14 quads against
# 7 x 10, 120 blocks against 129): ~-3 to -4 us of a 201 us layer, 7B int4 at 64 sequences
# +1.5-2% (docs/perf/2026-12-07-session63.md).
# 1. Build; the op harness's moe cases; the bits tests (warpgroup depth / policy / global sums,
#    CudaMoe.*, the routing inside); later CudaQuantGemm.* (every oracle case) if time allows.
# 2. V2-Lite batch 1: base / routing in gate_up / 16 down chunks / both; 7B int4 at 64 sequences:
#    base / evict_first / 4 quads / global sums / all three; both twice (round 1 of each first);
#    then bf16 at 64, the fused routers 1 and 3, 48 sequences base / all.
# Run as: run(command: "STOP=560 bash docs/perf/data/2026-12-07-session63/run7.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s7.txt
{ git apply docs/perf/data/2026-12-07-session63/run7.diff 2>/dev/null || patch -p1 <docs/perf/data/2026-12-07-session63/run7.diff; } || { echo "run7.diff does not apply" >>$S; finish 7; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_harness_test cuda_kernel_bench"; build; unset TARGETS
gtests harness cuda/cuda_harness_test '*MoeBlock*:*MoeRouter*:*MoeExperts*' 60 10
gtests bits_tests cuda/cuda_ops_test 'CudaQuantGemm.Warpgroup*:CudaMoe.*:CudaFused.MoeBlock*:CudaFused.MoeRouter*' 90
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
ALL="FRUGAL_QSLAB_WG_U=4 FRUGAL_QSLAB_EVICT_FIRST=1 FRUGAL_QSLAB_WG_GSUMS=1"
ab() { # round
  e2e int4_b64_base_$1 /tmp/q7b "" $B --batches 64 --precision int4
  e2e int4_b64_ef_$1 /tmp/q7b "FRUGAL_QSLAB_EVICT_FIRST=1" $B --batches 64 --precision int4
  e2e int4_b64_u4_$1 /tmp/q7b "FRUGAL_QSLAB_WG_U=4" $B --batches 64 --precision int4
  e2e int4_b64_gs_$1 /tmp/q7b "FRUGAL_QSLAB_WG_GSUMS=1" $B --batches 64 --precision int4
  e2e int4_b64_all_$1 /tmp/q7b "$ALL" $B --batches 64 --precision int4
}
v2ab() { # round
  v2l_b1 v2l_base_$1 ""
  v2l_b1 v2l_route_$1 "FRUGAL_FUSE_MOE_ROUTE=1"
  v2l_b1 v2l_down16_$1 FRUGAL_MOE_TINY_DOWN_U=16
  v2l_b1 v2l_both_$1 "FRUGAL_MOE_TINY_DOWN_U=16 FRUGAL_FUSE_MOE_ROUTE=1"
}
# Round 1 of each first: a call cut short (STOP) still has one of every point.
v2ab 1
ab 1
v2ab 2
ab 2
e2e bf16_b64 /tmp/q7b "" $B --batches 64
v2l_b1 v2l_route1 FRUGAL_FUSE_ROUTE=1
v2l_b1 v2l_route3 FRUGAL_FUSE_ROUTE=3
e2e int4_b48_base /tmp/q7b "" $B --batches 48 --precision int4
e2e int4_b48_all /tmp/q7b "$ALL" $B --batches 48 --precision int4
[ $(left) -gt 100 ] && gtests ops_tests cuda/cuda_ops_test 'CudaQuantGemm.*:CudaInt4Tiles8.*' $(( $(left) - 40 ))
finish 7
