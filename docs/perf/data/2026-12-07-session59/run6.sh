#!/usr/bin/env bash
# Session 59, run 6 (built, not run: this session's device time went to runs 1-4). Issue 19.3:
# the shared experts' weights asked of L2 during the attention part (ops::CacheHint on
# mla_attention, l2_prefetch.cu, FRUGAL_L2_HINT_MB). At V2-Lite batch 1 (H100) the attention part
# is ~33.5 us of latency-bound kernels that leave DRAM mostly idle, and the MoE after it streams
# 138 MB in ~50.7 us, 35 MB of it the shared experts (gate 11.5, up 11.5, down 11.5 MB), which
# depend on no routing. Prediction: with 24 MB (gate and up) the MoE part drops by ~8 us a layer
# if they stay in L2 (50 MB) until gate_up reads them, the attention part gains ~1 us (one more
# grid in its chain): +6-8% (H100 ~372 -> ~395-400 tok/s). With 36 MB (down too) more, if L2
# holds it beside the o projection's and the routed experts' streams.
# The persistent MLA kernel (opt-in) asks for the hint itself after its first barrier, with no
# extra grid: if the hint pays, it may pay more there. FRUGAL_L2_HINT_SPREAD=1 asks for one range
# after each of the sequence's first steps instead of all at once (a 24-36 MB burst could queue
# ahead of the chain's own loads; three grids cost three hops).
# 1. CudaFused.MlaAttention* (now also: a hint, eager and captured, gives the sequence's bits and
#    one prefetch grid a call, and the kernel's bits and no grid; the cap takes a prefix); CudaMoe.*.
# 2. V2-Lite batch 1 (128 in / 256 out): no hint, 12, 24 and 36 MB, twice each; the persistent
#    kernel without a hint and with 24 MB, and 36 MB spread, twice each.
# 3. Kernel traces without a hint and with 24 MB, split by layer_split.py (the MoE part is what
#    should move).
# Run as: run(command: "STOP=560 bash docs/perf/data/2026-12-07-session59/run6.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s6.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test"; build; unset TARGETS
(timeout 90 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.MlaAttention*:CudaMoe.*' >$L/tests.log 2>&1
 echo "tests: rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^\[  (PASSED|FAILED) |Failure$" -A1 $L/tests.log | head -20 >>$S
for i in 1 2; do
  for mb in 0 12 24 36; do v2l_b1 hint${mb}_$i FRUGAL_L2_HINT_MB=$mb; done
  for mb in 0 24; do v2l_b1 kernel_hint${mb}_$i "FRUGAL_FUSE_MLA_ATTN=1 FRUGAL_L2_HINT_MB=$mb"; done
  v2l_b1 spread36_$i "FRUGAL_L2_HINT_MB=36 FRUGAL_L2_HINT_SPREAD=1"
done
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
[ $(left) -gt 45 ] && trace hint0_tr /tmp/v2l "FRUGAL_L2_HINT_MB=0" $V --batches 1
[ $(left) -gt 45 ] && trace hint24_tr /tmp/v2l "FRUGAL_L2_HINT_MB=24" $V --batches 1
for t in $L/trace_hint0_tr/decode_b1.trace.json $L/trace_hint24_tr/decode_b1.trace.json; do
  [ -f $t ] && python3 docs/perf/data/2026-12-07-session58/layer_split.py $t >>$S 2>&1
done
finish 6
