#!/usr/bin/env bash
# Session 49, run 2: decode attention's new stage rule (the deepest of 4 / 3 stages whose
# residency holds a bf16 batch's blocks in one wave) and the 8-warp blocks (FRUGAL_DECODE_MMA_WARPS=8,
# opt-in): their tests, then A/B end to end at 8 / 16 / 32 / 64 sequences of 512-token prompts,
# and at 16 of 2048 (three splits a unit) against the old 2 stages.
# Run as: run(command: "bash docs/perf/data/2026-12-06-session49/run2.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test"; build; unset TARGETS
(cd build-gpu && timeout 150 ctest -R CudaAttention -E DecodeMmaNoSplitLargeBatch -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "attention ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -16 >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
for b in 16 64 32; do
  e2e int4_b${b} /tmp/q7b "" $B --batches $b --precision int4
  e2e int4_b${b}_w8 /tmp/q7b "FRUGAL_DECODE_MMA_WARPS=8" $B --batches $b --precision int4
done
e2e int4_b16_st2 /tmp/q7b "FRUGAL_DECODE_MMA_STAGES=2" $B --batches 16 --precision int4
e2e bf16_b16 /tmp/q7b "" $B --batches 16
e2e bf16_b16_w8 /tmp/q7b "FRUGAL_DECODE_MMA_WARPS=8" $B --batches 16
e2e bf16_b64 /tmp/q7b "" $B --batches 64
e2e int4_b8 /tmp/q7b "" $B --batches 8 --precision int4
e2e int4_b8_w8 /tmp/q7b "FRUGAL_DECODE_MMA_WARPS=8" $B --batches 8 --precision int4
B2="--prefill-lens 0 --decode-prompt-len 2048 --decode-tokens 64 --reps 2 --warmup 1"
e2e int4_p2k_b16 /tmp/q7b "" $B2 --batches 16 --precision int4
e2e int4_p2k_b16_st2 /tmp/q7b "FRUGAL_DECODE_MMA_STAGES=2" $B2 --batches 16 --precision int4
e2e int4_p2k_b16_w8 /tmp/q7b "FRUGAL_DECODE_MMA_WARPS=8" $B2 --batches 16 --precision int4
trace int4_b16_w8_tr /tmp/q7b "FRUGAL_DECODE_MMA_WARPS=8" $B --batches 16 --precision int4
finish 2
