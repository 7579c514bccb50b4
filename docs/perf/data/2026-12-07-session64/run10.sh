#!/usr/bin/env bash
# Session 64, run 10 (built, not run): after run9.sh on the same warm machine (its build-gpu
# stays; no build here). FRUGAL_QSLAB_SPLITS="NxK:S" (quant_gemm_slab.cu, an A/B knob) forces the
# slab GEMM's k slices for one weight shape, so each split count of one GEMM of the 7B int4 step
# is timed end to end in one build. At 16 sequences the planner's cost gives gate_up (37888 x
# 3584) 4 slices: its f32 partials (9.7 MB) are 28% of its codes' bytes, written by the GEMM and
# read back by the split silu (5.2 against bf16's 3.0 us, H100, session 64). Fewer slices cut
# that traffic and leave fewer, longer block walks; only the step can say which wins. Also down
# (3584 x 18944, 9 slices at 16), o (3584 x 3584, 7) and q / k / v (4608 x 3584, 7) at fewer
# slices, and down at 64 sequences (13 slices; gate_up cannot go below 3 there: its x fills the
# shared memory). Two rounds, alternating.
# Run as: run(command: "STOP=400 bash docs/perf/data/2026-12-07-session64/run10.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s10.txt
nvidia-smi --query-gpu=name --format=csv,noheader >>$S
[ -x build-gpu/src/cli/frugal ] || { echo "no build here" >>$S; finish 10; exit 1; }
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1 --precision int4"
for r in 1 2; do
  e2e b16_base_$r /tmp/q7b "" $B --batches 16
  e2e b16_g1_$r /tmp/q7b "FRUGAL_QSLAB_SPLITS=37888x3584:1" $B --batches 16
  e2e b16_g2_$r /tmp/q7b "FRUGAL_QSLAB_SPLITS=37888x3584:2" $B --batches 16
  e2e b16_g3_$r /tmp/q7b "FRUGAL_QSLAB_SPLITS=37888x3584:3" $B --batches 16
  e2e b16_d5_$r /tmp/q7b "FRUGAL_QSLAB_SPLITS=3584x18944:5" $B --batches 16
  e2e b16_oq4_$r /tmp/q7b "FRUGAL_QSLAB_SPLITS=3584x3584:4,4608x3584:4" $B --batches 16
  e2e b64_base_$r /tmp/q7b "" $B --batches 64
  e2e b64_d8_$r /tmp/q7b "FRUGAL_QSLAB_SPLITS=3584x18944:8" $B --batches 64
done
finish 10
