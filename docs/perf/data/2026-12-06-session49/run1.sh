#!/usr/bin/env bash
# Session 49, run 1: the tree after the slab GEMM's tickets came out (session 48's run 5: -25% /
# -71% at 16 / 64 sequences) and its kernels moved into five files that compile in parallel.
# 1. `ctest -L cuda` on the whole tree (issue 18.1; the first full run since session 45: the
#    ring, int8 tiles, the attention split rule and its dispatch test, the float4 reduce).
# 2. Decode attention's stages and prefetches at 16 / 64 sequences (environment only): at one
#    split a sequence 16 sequences leave 68 of 132 SMs without a block, so deeper stages cost no
#    occupancy there.
# 3. The issue points with this tree: 18.2 batch 1 (int4 / int8 / fp8 / bf16), 18.3 (16 / 64),
#    19.3 (V2-Lite batch 1).
# Run as: run(command: "bash docs/perf/data/2026-12-06-session49/run1.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
build
l=$(left); t=$((l - 200)); [ $t -gt 250 ] && t=250
if [ $t -gt 60 ]; then
  (cd build-gpu && timeout $t ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
  grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -16 >>$S
fi
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
e2e int4_b16_st4 /tmp/q7b "FRUGAL_DECODE_MMA_STAGES=4" $B --batches 16 --precision int4
e2e int4_b16_st3 /tmp/q7b "FRUGAL_DECODE_MMA_STAGES=3" $B --batches 16 --precision int4
e2e int4_b16_l2 /tmp/q7b "FRUGAL_DECODE_L2_PREFETCH=1" $B --batches 16 --precision int4
B1="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
e2e int4_b1 /tmp/q7b "" $B1 --batches 1 --precision int4
trace int4_b16_tr /tmp/q7b "" $B --batches 16 --precision int4
e2e bf16_b16 /tmp/q7b "" $B --batches 16
e2e int4_b64 /tmp/q7b "" $B --batches 64 --precision int4
e2e int4_b64_st3 /tmp/q7b "FRUGAL_DECODE_MMA_STAGES=3" $B --batches 64 --precision int4
e2e bf16_b64 /tmp/q7b "" $B --batches 64
for prec in int8 fp8-channel; do e2e ${prec}_b1 /tmp/q7b "" $B1 --batches 1 --precision $prec; done
e2e bf16_b1 /tmp/q7b "" $B1 --batches 1
e2e v2l_b1 /tmp/v2l "" --prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1
finish 1
