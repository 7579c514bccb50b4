#!/usr/bin/env bash
# Session 48, run 3: the knobs at 16 and 64 sequences (issue 18.3), after run 2's traces put
# the decode attention (+ its combine) at 18% / 21% of an int4 step and the slab GEMM's split-k
# reduce kernels at 8.5% / 9%. Environment only (no code change): attention split count and
# combine mode, the slab's chains, batch shape and shared-memory cap; int4 and bf16.
# Run as: run(command: "bash docs/perf/data/2026-12-06-session48/run3.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal"; build; unset TARGETS
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
for b in 16 64; do
  e2e int4_b${b} /tmp/q7b "" $B --batches $b --precision int4
  e2e bf16_b${b} /tmp/q7b "" $B --batches $b
  for sp in 1 2 4; do e2e int4_b${b}_splits$sp /tmp/q7b "FRUGAL_DECODE_SPLITS=$sp" $B --batches $b --precision int4; done
  for c in fused separate; do e2e int4_b${b}_combine_$c /tmp/q7b "FRUGAL_DECODE_COMBINE=$c" $B --batches $b --precision int4; done
  e2e int4_b${b}_chains1 /tmp/q7b "FRUGAL_QSLAB_CHAINS=1" $B --batches $b --precision int4
  e2e int4_b${b}_smem120 /tmp/q7b "FRUGAL_QSLAB_SMEM_KB=120" $B --batches $b --precision int4
done
e2e int4_b16_u4 /tmp/q7b "FRUGAL_QGEMM_W=4" $B --batches 16 --precision int4
e2e int4_b64_alt /tmp/q7b "FRUGAL_QGEMM_W=2 FRUGAL_QGEMM_R=1" $B --batches 64 --precision int4
for sp in 1 4; do e2e bf16_b16_splits$sp /tmp/q7b "FRUGAL_DECODE_SPLITS=$sp" $B --batches 16; done
e2e bf16_b16_combine_fused /tmp/q7b "FRUGAL_DECODE_COMBINE=fused" $B --batches 16
for sp in 1 4; do e2e bf16_b64_splits$sp /tmp/q7b "FRUGAL_DECODE_SPLITS=$sp" $B --batches 64; done
finish 3
