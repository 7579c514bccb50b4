#!/usr/bin/env bash
# Session 62, run 3 (the H200 of run 1, warm): 18.3 at 64 sequences, the warpgroup int4 GEMM (the
# default) against the mma.sync slab kernel (FRUGAL_QSLAB_WG=0), twice each; bf16 at 64 again and
# bf16 batch 1 twice (run 1's 240.3 sat below the 244.0 record).
# Run as: run(command: "bash docs/perf/data/2026-12-07-session62/run3.sh", carry: [".devcarry"], needs_h200: true), after run 1's build.
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
STOP=200
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
for i in 1 2; do
  e2e int4_b64_wg_$i /tmp/q7b "" $B --batches 64 --precision int4
  e2e int4_b64_slab_$i /tmp/q7b "FRUGAL_QSLAB_WG=0" $B --batches 64 --precision int4
done
e2e bf16_b64_again /tmp/q7b "" $B --batches 64
for i in 1 2; do e2e bf16_b1_$i /tmp/q7b "" --prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1 --batches 1; done
finish 3
